package infra

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/github"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/models"
)

// Delivery is a webhook request as GitHub sent it.
type Delivery struct {
	Event     string // X-GitHub-Event
	ID        string // X-GitHub-Delivery
	Signature string // X-Hub-Signature-256
	Body      []byte
}

// WebhookResult is what became of a delivery; the web layer chooses the
// HTTP answer for each outcome.
type WebhookResult struct {
	Outcome WebhookOutcome
	Message string
}

// WebhookOutcome is what became of a delivery that was not refused.
type WebhookOutcome string

// The outcomes of a delivery.
const (
	WebhookAccepted  WebhookOutcome = "accepted"  // recorded; its work is queued
	WebhookDuplicate WebhookOutcome = "duplicate" // this delivery id was received before
	WebhookIgnored   WebhookOutcome = "ignored"   // nothing for Gantry to do
	WebhookPing      WebhookOutcome = "ping"      // GitHub's hello when a hook is made
)

// ReceiveWebhook checks a delivery and, when it concerns a configured
// repository's trunk, records it and queues its work in one transaction. It
// never does the work itself: GitHub waits ten seconds at most.
func (s *Service) ReceiveWebhook(ctx context.Context, d Delivery) (WebhookResult, error) {
	res, err := s.receive(ctx, d)
	s.Metrics.delivery(d.Event, deliveryResult(res, err))
	return res, err
}

// deliveryResult names what became of a delivery, for the metrics.
func deliveryResult(res WebhookResult, err error) string {
	switch {
	case apperr.CodeOf(err) == apperr.Unauthorized:
		return "refused"
	case apperr.CodeOf(err) == apperr.Invalid:
		return "invalid"
	case err != nil:
		return "error"
	}
	return string(res.Outcome)
}

func (s *Service) receive(ctx context.Context, d Delivery) (WebhookResult, error) {
	repos, err := models.ListRepositories(ctx, s.Queue.DB())
	if err != nil {
		return WebhookResult{}, err
	}
	// The signature is checked against every repository's secret before
	// anything of the body is believed, the repository it names included.
	var signedFor []models.Repository
	var unset []string
	for _, r := range repos {
		secret := s.Getenv(r.WebhookSecretEnv)
		if secret == "" {
			unset = append(unset, r.WebhookSecretEnv)
			continue
		}
		if github.VerifySignature([]byte(secret), d.Body, d.Signature) == nil {
			signedFor = append(signedFor, r)
		}
	}
	if len(signedFor) == 0 {
		msg := fmt.Sprintf("The %s header does not match the body signed with any configured repository's webhook secret.", github.HeaderSignature)
		if d.Signature == "" {
			msg = fmt.Sprintf("The delivery has no %s header: give the GitHub webhook a secret, the one in the repository's webhook_secret_env.", github.HeaderSignature)
		}
		if len(unset) > 0 {
			// The operator's mistake, not the sender's: the log names the
			// variables; the sender, who may be anyone, learns only that.
			s.Logger.WarnContext(ctx, "webhook secrets not set: deliveries for these repositories are refused", "variables", strings.Join(unset, ", "))
			msg += " Some repositories' webhook secrets are not set on this Gantry; its log names them."
		}
		return WebhookResult{}, apperr.New(apperr.Unauthorized, "%s", msg)
	}
	ev, err := github.ParseEvent(d.Event, d.Body)
	if err != nil {
		return WebhookResult{}, apperr.New(apperr.Invalid, "%v", err)
	}
	var repoOfEvent github.Repository
	switch e := ev.(type) {
	case github.Ping:
		if !e.Subscribed(github.EventPullRequest) {
			return WebhookResult{Outcome: WebhookPing, Message: "pong; this hook does not send pull_request events, which Gantry needs"}, nil
		}
		return WebhookResult{Outcome: WebhookPing, Message: "pong"}, nil
	case github.PullRequest:
		repoOfEvent = e.Repository
		repo := matchRepository(signedFor, e.Repository)
		if repo == nil {
			return ignored("repository %s is not configured in Gantry", e.Repository.FullName), nil
		}
		if e.Base.Ref != repo.Trunk {
			return ignored("pull request #%d targets %s, not the trunk %s", e.Number, e.Base.Ref, repo.Trunk), nil
		}
		if !e.IsActivity() && e.Action != github.ActionClosed {
			return ignored("action %s needs no plan", e.Action), nil
		}
		if strings.TrimSpace(d.ID) == "" || len(d.ID) > 200 {
			return WebhookResult{}, apperr.Field(github.HeaderDelivery, "is required: GitHub's delivery id, which makes redeliveries harmless")
		}
		return s.accept(ctx, repo, d, e.Action, repoOfEvent)
	default:
		return ignored("Gantry does not act on %s events", d.Event), nil
	}
}

func ignored(format string, args ...any) WebhookResult {
	return WebhookResult{Outcome: WebhookIgnored, Message: fmt.Sprintf(format, args...)}
}

func (s *Service) accept(ctx context.Context, repo *models.Repository, d Delivery, action string, ghRepo github.Repository) (WebhookResult, error) {
	res := WebhookResult{Outcome: WebhookAccepted, Message: "accepted"}
	err := s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		fresh, err := models.RecordDelivery(ctx, tx, &models.WebhookDelivery{
			DeliveryID: d.ID, Event: d.Event, Action: action, Repository: repo.Name, Payload: d.Body,
		})
		if err != nil {
			return err
		}
		if !fresh {
			res = WebhookResult{Outcome: WebhookDuplicate, Message: fmt.Sprintf("delivery %s was already received", d.ID)}
			return nil
		}
		if ghRepo.FullName != "" {
			if err := models.SetGitHubFullName(ctx, tx, repo.Name, ghRepo.FullName); err != nil {
				return err
			}
		}
		return tx.Enqueue(ctx, jobs.HandleDeliveryArgs{DeliveryID: d.ID}, nil)
	})
	return res, err
}

// matchRepository finds the configured repository an event is about: the
// one whose URL is the event's clone, SSH or web URL, or names its
// owner/name.
func matchRepository(repos []models.Repository, r github.Repository) *models.Repository {
	for i := range repos {
		want := normalizeURL(repos[i].URL)
		for _, u := range []string{r.CloneURL, r.SSHURL, r.HTMLURL} {
			if u != "" && normalizeURL(u) == want {
				return &repos[i]
			}
		}
		if r.FullName != "" && strings.HasSuffix(want, "/"+strings.ToLower(r.FullName)) {
			return &repos[i]
		}
	}
	return nil
}

// normalizeURL reduces the spellings of one repository's URL to one:
// https://github.com/a/b.git, git@github.com:a/b and ssh://git@github.com/a/b
// all become github.com/a/b.
func normalizeURL(u string) string {
	u = strings.ToLower(strings.TrimSpace(u))
	for _, p := range []string{"https://", "http://", "ssh://", "git://", "file://"} {
		u = strings.TrimPrefix(u, p)
	}
	if at := strings.Index(u, "@"); at >= 0 && !strings.HasPrefix(u, "/") {
		u = u[at+1:]
	}
	if i := strings.Index(u, ":"); i > 0 && !strings.HasPrefix(u, "/") {
		u = u[:i] + "/" + u[i+1:]
	}
	u = strings.TrimSuffix(strings.TrimSuffix(u, "/"), ".git")
	return u
}

// HandleDelivery does the work of a recorded delivery: a pull request's
// new head is planned, a merge queues a run, a closed one stops planning.
func (s *Service) HandleDelivery(ctx context.Context, deliveryID string) error {
	db := s.Queue.DB()
	d, err := models.DeliveryByID(ctx, db, deliveryID)
	if err != nil {
		return err
	}
	ev, err := github.ParseEvent(d.Event, d.Payload)
	if err != nil {
		return fmt.Errorf("delivery %s: %w", deliveryID, err)
	}
	e, ok := ev.(github.PullRequest)
	if !ok {
		return nil
	}
	repo, err := models.RepositoryByName(ctx, db, d.Repository)
	if err != nil {
		return err
	}
	pr := &models.PullRequest{
		Repository: repo.Name, Number: e.Number, Title: e.Title, Author: e.User, HTMLURL: e.HTMLURL,
		BaseRef: e.Base.Ref, HeadRef: e.Head.Ref, HeadSHA: e.Head.SHA, State: models.PROpen,
		EventAt: e.UpdatedAt, DeliveryAt: d.ReceivedAt,
	}
	if pr.EventAt.IsZero() {
		pr.EventAt = d.ReceivedAt
	}
	// Deliveries are handled by concurrent, retried jobs, so they may come
	// out of order: one older than what was applied already (a push after
	// the merge, say) changes nothing, and plans nothing.
	return s.Queue.InTx(ctx, func(ctx context.Context, tx jobs.Tx) error {
		switch {
		case e.IsActivity():
			if applied, err := models.UpsertPullRequest(ctx, tx, pr); err != nil || !applied {
				return err
			}
			// A newer push makes the older plans moot.
			if err := s.cancelPlans(ctx, tx, repo.Name, e.Number, e.Head.SHA); err != nil {
				return err
			}
			if fork := e.Head.RepoFullName != e.Repository.FullName; fork && !repo.PlanForks {
				// A plan would run the fork's code with the plan role.
				source := e.Head.RepoFullName
				if source == "" {
					source = "a deleted fork"
				}
				if err := models.SetPlanError(ctx, tx, repo.Name, e.Number, e.Head.SHA, fmt.Sprintf(
					"Not planned: the pull request comes from %s, and a plan runs its code with the plan role's credentials. A maintainer can push it to a branch of %s, or set plan_forks: true for %s in gantry.yaml.",
					source, e.Repository.FullName, repo.Name)); err != nil {
					return err
				}
			} else if err := tx.Enqueue(ctx, jobs.PlanPullRequestArgs{Repository: repo.Name, Number: e.Number, HeadSHA: e.Head.SHA}, nil); err != nil {
				return err
			}
			return s.queueMergeLockStatus(ctx, tx, repo, pr)
		case e.IsMerge():
			if e.MergeCommitSHA == "" {
				return fmt.Errorf("delivery %s: merged pull request #%d has no merge commit", deliveryID, e.Number)
			}
			pr.State, pr.MergeCommitSHA = models.PRMerged, e.MergeCommitSHA
			// A merge happened whatever came after it: its run is made
			// even when a later delivery was applied already.
			if _, err := models.UpsertPullRequest(ctx, tx, pr); err != nil {
				return err
			}
			if err := s.cancelPlans(ctx, tx, repo.Name, e.Number, ""); err != nil {
				return err
			}
			if _, err := models.RunOfMerge(ctx, tx, repo.Name, e.MergeCommitSHA); err == nil {
				return nil // a second delivery of the same merge under another id
			} else if !errors.Is(err, models.ErrNotFound) {
				return err
			}
			run := &models.Run{
				Repository: repo.Name, PRNumber: e.Number, PRTitle: e.Title, BaseRef: e.Base.Ref, HeadRef: e.Head.Ref,
				HeadSHA: e.Head.SHA, MergeCommit: e.MergeCommitSHA, Scan: repo.Scan,
			}
			if err := models.InsertRun(ctx, tx, run); err != nil {
				return err
			}
			if err := s.log(ctx, tx, run, RunTarget(run.ID), EventRunQueued, "github:"+e.MergedBy,
				map[string]any{"pull_request": e.Number, "merge_commit": e.MergeCommitSHA, "delivery": deliveryID}); err != nil {
				return err
			}
			return tx.Enqueue(ctx, jobs.StartRunArgs{RunID: run.ID}, nil)
		default: // closed without merging
			pr.State = models.PRClosed
			if applied, err := models.UpsertPullRequest(ctx, tx, pr); err != nil || !applied {
				return err
			}
			return s.cancelPlans(ctx, tx, repo.Name, e.Number, "")
		}
	})
}

// cancelPlans cancels the queued and running plans of a pull request at
// any head but keep, and their jobs: a running plan's command is stopped
// wherever it runs.
func (s *Service) cancelPlans(ctx context.Context, tx jobs.Tx, repo string, number int, keep string) error {
	canceled, err := models.CancelOlderPlans(ctx, tx, repo, number, keep)
	if err != nil {
		return err
	}
	for _, p := range canceled {
		if p.JobID != nil {
			if err := tx.CancelJob(ctx, *p.JobID); err != nil {
				return err
			}
		}
	}
	return nil
}
