package web

import (
	"github.com/gantryhq/gantry/assets"
	"github.com/gantryhq/gantry/internal/auth"
	"github.com/gantryhq/gantry/internal/pageurl"
	"github.com/gantryhq/gantry/models"
)

// routes is every URL Gantry answers with who may call it: page(role) for
// browser pages (redirects to sign-in), api(role, scope) for the JSON API (a
// token needs the scope too; a session needs only the role). The URLs shared
// by every area are here; each area's are at the top of its handler file
// (its Area's Routes), registered at the end in the navigation's order.
// apiClient(scope) admits the clients on gantry.yaml's allow list, and
// apiOrClient either.
func (s *Server) routes() {
	e := s.echo
	s.middleware()
	// The API's rate limit, on /api/v1 and the areas' API routes.
	limit := s.apiRateLimit()

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
	e.GET("/tokens", s.tokensPage, viewer)
	e.POST("/tokens", s.createTokenForm, viewer)
	e.POST("/tokens/:id/revoke", s.revokeTokenForm, viewer)

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

	// JSON API.
	v1 := e.Group("/api/v1", limit)
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
	v1.GET("/approvals", s.apiApprovals, s.api(models.RoleViewer, auth.ScopeRead))

	// Each area's pages and API, in the order of the navigation.
	r := &Router{s: s, api: v1, limit: limit}
	for _, a := range s.Areas {
		a.Routes(r)
	}
	v1.Any("/*", s.apiNotFound)
}
