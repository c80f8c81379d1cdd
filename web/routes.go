package web

import (
	"fmt"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/gantryhq/gantry/assets"
	"github.com/gantryhq/gantry/internal/auth"
	"github.com/gantryhq/gantry/internal/github"
	"github.com/gantryhq/gantry/internal/pageurl"
	"github.com/gantryhq/gantry/models"
)

// routes is every URL Gantry answers, grouped by area, with who may call it:
// page(role) for browser pages (redirects to sign-in), api(role, scope) for
// the JSON API (a token needs the scope too; a session needs only the role).
func (s *Server) routes() {
	e := s.echo
	s.middleware()

	// Probes, metrics, assets: no session needed (metrics wants a read token).
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	e.GET("/metrics", s.metricsPage, s.api(models.RoleViewer, auth.ScopeRead))
	e.GET(assets.Prefix+":name", s.asset)

	// Signing in and out.
	e.GET("/login", s.loginPage)
	e.POST("/login", s.login)
	e.POST("/logout", s.logout, s.page(models.RoleViewer))

	// Pages, for everyone signed in.
	viewer := s.page(models.RoleViewer)
	e.GET("/", s.home, viewer)
	e.GET("/log", s.logPage, viewer)
	e.GET("/log/stream", s.logStream, viewer)
	e.GET("/environments", s.environmentsPage, viewer)
	e.GET("/environments/allocations", s.allocationHistoryPage, viewer)
	e.GET("/environments/:id", s.environmentPage, viewer)
	e.POST("/environments/:id/retry-cleanup", s.retryCleanupForm, s.page(models.RoleOperator))
	e.POST("/environments/:id/mark-clean", s.markCleanForm, s.page(models.RoleOperator))
	e.GET("/daemons", s.areaPage(areaDaemons), viewer)
	e.GET("/modules", s.areaPage(areaModules), viewer)
	e.GET("/pipelines", s.areaPage(areaPipelines), viewer)
	e.GET("/tokens", s.tokensPage, viewer)
	e.POST("/tokens", s.createTokenForm, viewer)
	e.POST("/tokens/:id/revoke", s.revokeTokenForm, viewer)

	// Infrastructure (seed 000): repositories, pull requests and their plans,
	// runs with their execution graph, executions with live output and votes.
	// The output tails are JSON for the pages' own script.
	e.GET("/infra", s.infraPage, viewer)
	e.GET("/infra/runs", s.runsPage, viewer)
	e.GET("/infra/runs/:id", s.runPage, viewer)
	e.POST("/infra/runs/:id/abort", s.abortRunForm, s.page(models.RoleOperator))
	e.GET("/infra/executions/:execution_id", s.executionPage, viewer)
	e.GET("/infra/executions/:execution_id/output", s.executionOutputTail, viewer)
	e.POST("/infra/executions/:execution_id/vote", s.voteForm, s.page(models.RoleApprover))
	e.GET("/infra/plans/:id", s.planPage, viewer)
	e.GET("/infra/plans/:id/output", s.planOutputTail, viewer)
	e.GET("/infra/:repo/pulls/:number", s.pullRequestPage, viewer)

	// Approvals: what waits for the signed-in user's vote, and the emailed
	// voting link, which needs no sign-in: its signed token is the credential.
	e.GET("/approvals", s.approvalsPage, viewer)
	e.GET(pageurl.VotingLinkPrefix+":token", s.linkPage)
	e.POST(pageurl.VotingLinkPrefix+":token", s.linkVote)

	// The dev mailbox, only under gantry dev (elsewhere these are 404s).
	if s.Mailbox != nil {
		e.GET("/dev/mailbox", s.mailboxPage, viewer)
		e.GET("/dev/mailbox/:id", s.mailPage, viewer)
	}

	// Administration pages.
	admin := e.Group("/admin", s.page(models.RoleAdmin))
	admin.GET("", s.adminIndex)
	admin.GET("/users", s.usersPage)
	admin.POST("/users", s.createUserForm)
	admin.POST("/users/:id/role", s.setRoleForm)
	admin.POST("/users/:id/disable", s.disableUserForm)
	admin.POST("/users/:id/enable", s.enableUserForm)
	admin.GET("/tokens", s.allTokensPage)
	admin.POST("/tokens/:id/revoke", s.revokeTokenForm)
	admin.GET("/jobs", s.jobsPage)
	admin.POST("/jobs/:id/retry", s.retryJobForm)
	admin.POST("/jobs/:id/cancel", s.cancelJobForm)
	admin.Any("/river", s.riverUI)
	admin.Any("/river/*", s.riverUI)

	// Environment pools: seed 001's routes, and the same under /api/v1.
	for _, g := range []*echo.Group{e.Group(""), e.Group("/api/v1")} {
		g.POST("/allocations", s.allocate, s.leaseClient)
		g.GET("/allocations", s.listAllocations, s.leaseReader)
		g.GET("/allocations/:id", s.getAllocation, s.leaseReader)
		g.DELETE("/allocations/:id", s.releaseAllocation, s.leaseClient)
		g.POST("/allocations/:id/extend", s.extendAllocation, s.leaseClient)
		g.GET("/pools", s.listPools, s.leaseReader)
	}

	// GitHub's deliveries: authenticated by their signature, not a session.
	e.POST(webhookPath, s.githubWebhook, middleware.BodyLimit(fmt.Sprintf("%dB", github.MaxPayloadSize)))

	// JSON API.
	v1 := e.Group("/api/v1", s.apiRateLimit())
	v1.GET("/me", s.apiMe, s.api(models.RoleViewer, auth.ScopeRead))
	v1.GET("/log", s.apiListLog, s.api(models.RoleViewer, auth.ScopeRead))
	v1.POST("/log", s.apiAppendLog, s.api(models.RoleOperator, auth.ScopeWrite))
	v1.GET("/log/latest", s.apiLatestRevision, s.api(models.RoleViewer, auth.ScopeRead))
	v1.GET("/log/in-progress", s.apiInProgress, s.api(models.RoleViewer, auth.ScopeRead))
	v1.GET("/tokens", s.apiListTokens, s.api(models.RoleViewer, auth.ScopeRead))
	v1.POST("/tokens", s.apiCreateToken, s.api(models.RoleViewer, auth.ScopeWrite))
	v1.DELETE("/tokens/:id", s.apiRevokeToken, s.api(models.RoleViewer, auth.ScopeWrite))
	v1.GET("/users", s.apiListUsers, s.api(models.RoleAdmin, auth.ScopeAdmin))
	v1.POST("/users", s.apiCreateUser, s.api(models.RoleAdmin, auth.ScopeAdmin))
	v1.PATCH("/users/:id", s.apiUpdateUser, s.api(models.RoleAdmin, auth.ScopeAdmin))
	v1.GET("/jobs", s.apiListJobs, s.api(models.RoleAdmin, auth.ScopeAdmin))
	v1.GET("/infra/repositories", s.apiRepositories, s.api(models.RoleViewer, auth.ScopeRead))
	v1.GET("/infra/runs", s.apiListRuns, s.api(models.RoleViewer, auth.ScopeRead))
	v1.GET("/infra/runs/:id", s.apiGetRun, s.api(models.RoleViewer, auth.ScopeRead))
	v1.POST("/infra/runs/:id/abort", s.apiAbortRun, s.api(models.RoleOperator, auth.ScopeWrite))
	v1.GET("/infra/executions/:execution_id", s.apiGetExecution, s.api(models.RoleViewer, auth.ScopeRead))
	v1.POST("/infra/executions/:execution_id/votes", s.apiVote, s.api(models.RoleApprover, auth.ScopeVote))
	v1.GET("/approvals", s.apiApprovals, s.api(models.RoleViewer, auth.ScopeRead))
	v1.Any("/*", s.apiNotFound)
}
