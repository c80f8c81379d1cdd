// Package pageurl is where Gantry's pages are: the one place their paths
// are spelled, for the routes' handlers, redirects, the links of emails and
// the target URLs of GitHub commit statuses. Paths are relative; callers
// that leave Gantry (mail, GitHub) put the public base URL before them.
package pageurl

import (
	"net/url"
	"strconv"
)

// VotingLinkPrefix is where emailed voting links point; the signed token
// follows it.
const VotingLinkPrefix = "/approvals/link/"

// Approvals is what waits for the signed-in user's vote.
const Approvals = "/approvals"

// Infra is the infrastructure area's overview.
const Infra = "/infra"

// VotingLink is the page of one emailed voting link.
func VotingLink(token string) string { return VotingLinkPrefix + url.PathEscape(token) }

// Run is an infrastructure run's page.
func Run(id int64) string { return "/infra/runs/" + strconv.FormatInt(id, 10) }

// Plan is a pull request plan's page.
func Plan(id int64) string { return "/infra/plans/" + strconv.FormatInt(id, 10) }

// DriftCheck is the page of one drift check of a unit.
func DriftCheck(id int64) string { return "/infra/drift/" + strconv.FormatInt(id, 10) }

// Execution is an infrastructure execution's page.
func Execution(executionID string) string { return "/infra/executions/" + url.PathEscape(executionID) }

// Pull is a pull request's page.
func Pull(repo string, number int) string {
	return "/infra/" + url.PathEscape(repo) + "/pulls/" + strconv.Itoa(number)
}

// SignIn is the sign-in page that goes on to next once signed in.
func SignIn(next string) string {
	if next == "" {
		return "/login"
	}
	return "/login?" + url.Values{"next": {next}}.Encode()
}

// Pipelines is the pipelines area's overview.
const Pipelines = "/pipelines"

// Pipeline is a pipeline's page.
func Pipeline(name string) string { return "/pipelines/" + url.PathEscape(name) }

// PipelineRevision is a revision's page in its pipeline.
func PipelineRevision(pipeline, revision string) string {
	return Pipeline(pipeline) + "/revisions/" + url.PathEscape(revision)
}
