package web

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"golang.org/x/time/rate"

	"github.com/gantryhq/gantry/assets"
	"github.com/gantryhq/gantry/internal/access"
	"github.com/gantryhq/gantry/internal/apperr"
	"github.com/gantryhq/gantry/internal/auth"
	"github.com/gantryhq/gantry/internal/pageurl"
	"github.com/gantryhq/gantry/models"
)

const (
	sessionCookie = "gantry_session"
	csrfCookie    = "gantry_csrf"
	csrfField     = "_csrf"
	principalKey  = "gantry.principal"
	// leaseClientKey holds the allow-listed client a guard admitted.
	leaseClientKey = "gantry.lease-client"
	// unlimitedKey marks a caller a guard admitted without a rate limit.
	unlimitedKey = "gantry.unlimited"
	// AWSIdentityHeader carries a signed sts:GetCallerIdentity request.
	AWSIdentityHeader = "X-Gantry-AWS-Identity"
)

// principal is who is calling: a signed-in user, or a token and its owner.
type principal struct {
	User          *models.User
	Token         *models.APIToken // nil for browser sessions
	SessionSecret string
}

// Actor is how the log names the caller.
func (p *principal) Actor() string {
	if p.Token != nil {
		return "token:" + strconv.FormatInt(p.Token.ID, 10) + ":" + p.User.Email
	}
	return access.Actor(p.User)
}

// tokenOwnerScope is whose tokens the caller may revoke: their own (their
// id), or anyone's (0) for an admin signed in or holding the admin scope.
func (p *principal) tokenOwnerScope() int64 {
	if p.User.Role == models.RoleAdmin && (p.Token == nil || p.Token.HasScope(auth.ScopeAdmin)) {
		return 0
	}
	return p.User.ID
}

func principalOf(c echo.Context) *principal {
	p, _ := c.Get(principalKey).(*principal)
	return p
}

// middleware installs what every request passes through, outermost first.
func (s *Server) middleware() {
	e := s.echo
	e.IPExtractor = clientIP(s.Config.TrustedProxies)
	e.Pre(middleware.RemoveTrailingSlashWithConfig(middleware.TrailingSlashConfig{
		RedirectCode: http.StatusMovedPermanently,
		// River UI wants its root with the slash.
		Skipper: func(c echo.Context) bool { return strings.HasPrefix(c.Request().URL.Path, riverUIPrefix+"/") },
	}))
	e.Use(s.bodyDeadline)
	e.Use(middleware.RequestID())
	e.Use(s.logRequests())
	e.Use(s.metrics.middleware)
	// Inside logging and metrics, so a panic is counted and logged as a 500.
	e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{
		LogErrorFunc: func(c echo.Context, err error, stack []byte) error {
			s.Logger.Error("panic serving request", "error", err, "path", c.Path(), "request_id", requestID(c), "stack", string(stack))
			return err
		},
	}))
	e.Use(middleware.SecureWithConfig(middleware.SecureConfig{
		XSSProtection:         "0", // obsolete header; CSP does the job
		ContentTypeNosniff:    "nosniff",
		XFrameOptions:         "DENY",
		HSTSMaxAge:            hstsMaxAge(s.Config.SecureCookies()),
		ContentSecurityPolicy: "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'",
		ReferrerPolicy:        "same-origin",
	}))
	// Pages are compressed; API answers are small and setting up a gzip
	// writer for each costs more CPU than it saves bytes.
	e.Use(middleware.GzipWithConfig(middleware.GzipConfig{MinLength: 1024,
		Skipper: func(c echo.Context) bool { return isStream(c) || s.wantsJSON(c) }}))
	e.Use(middleware.ContextTimeoutWithConfig(middleware.ContextTimeoutConfig{
		Skipper: isStream,
		Timeout: s.Config.RequestTimeout,
	}))
	// Webhook deliveries may be larger; their route sets its own limit.
	e.Use(middleware.BodyLimitWithConfig(middleware.BodyLimitConfig{Limit: "1M", Skipper: s.signedRoute}))
	e.Use(s.authenticate)
	e.Use(middleware.CSRFWithConfig(middleware.CSRFConfig{
		Skipper:        s.skipCSRF,
		TokenLookup:    "form:" + csrfField + ",header:X-CSRF-Token",
		CookieName:     csrfCookie,
		CookiePath:     "/",
		CookieHTTPOnly: true,
		CookieSecure:   s.Config.SecureCookies(),
		CookieSameSite: http.SameSiteLaxMode,
		ErrorHandler: func(err error, c echo.Context) error {
			return apperr.New(apperr.Forbidden, "The form expired or came from another site. Reload the page and try again.")
		},
	}))
	e.Use(refuseNUL)
}

// bodyDeadline bounds how long reading a request's body may take (the
// server's ReadHeaderTimeout bounds its headers): a client trickling a body
// a byte at a time would otherwise hold its connection and handler for as
// long as it likes. The live streams, which read no body, are left alone:
// a server-wide ReadTimeout would end them.
func (s *Server) bodyDeadline(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !isStream(c) {
			// An error only means the connection cannot take a deadline
			// (HTTP/2 in tests); the request timeout still applies.
			_ = http.NewResponseController(c.Response().Writer).SetReadDeadline(time.Now().Add(s.Config.RequestTimeout))
		}
		return next(c)
	}
}

// clientIP believes X-Forwarded-For only from the configured proxies, so a
// client cannot claim another address to dodge the sign-in and API limits.
func clientIP(proxies []*net.IPNet) echo.IPExtractor {
	if len(proxies) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, p := range proxies {
		opts = append(opts, echo.TrustIPRange(p))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}

// apiRoute says the route is for programs: the API, metrics, the areas'
// routes for programs (Router.RootAndAPI, Router.Webhook).
func (s *Server) apiRoute(c echo.Context) bool {
	if _, ok := s.machine[c.Path()]; ok {
		return true
	}
	path := c.Request().URL.Path
	return strings.HasPrefix(path, "/api/") || path == "/metrics"
}

// signedRoute says the route's callers sign their requests (webhooks).
func (s *Server) signedRoute(c echo.Context) bool { return s.machine[c.Path()].signed }

// skipCSRF exempts token callers (no ambient credentials to forge), signed
// deliveries and the machine endpoints that never change anything.
func (s *Server) skipCSRF(c echo.Context) bool {
	if p := principalOf(c); p != nil && p.Token != nil {
		return true
	}
	if c.Request().Header.Get(AWSIdentityHeader) != "" {
		return true // signed by the caller's AWS credentials, no cookie involved
	}
	if s.signedRoute(c) {
		return true // signed with the webhook's secret; no cookie
	}
	if principalOf(c) == nil && s.apiRoute(c) {
		// Anonymous API calls carry no credentials to forge; they get 401.
		// Asking for JSON is not enough: a cross-site fetch may set Accept,
		// and a forged sign-in or link vote must still be refused.
		return true
	}
	path := c.Request().URL.Path
	return path == "/healthz" || path == "/readyz" || path == "/metrics" || strings.HasPrefix(path, assets.Prefix)
}

func hstsMaxAge(https bool) int {
	if https {
		return 31536000
	}
	return 0
}

func isStream(c echo.Context) bool { return strings.HasSuffix(c.Request().URL.Path, "/stream") }

func requestID(c echo.Context) string { return c.Response().Header().Get(echo.HeaderXRequestID) }

func (s *Server) logRequests() echo.MiddlewareFunc {
	return middleware.RequestLoggerWithConfig(middleware.RequestLoggerConfig{
		LogStatus: true, LogURIPath: true, LogMethod: true, LogLatency: true, LogRequestID: true, LogRemoteIP: true, LogError: true,
		HandleError: true, // let the error handler set the status before logging
		Skipper:     func(c echo.Context) bool { p := c.Request().URL.Path; return p == "/healthz" || p == "/readyz" },
		LogValuesFunc: func(c echo.Context, v middleware.RequestLoggerValues) error {
			level := slog.LevelInfo
			switch {
			case v.Status >= 500:
				level = slog.LevelError
			case v.Status < 400 && c.Get(routineRequestKey) != nil:
				level = slog.LevelDebug
			}
			s.Logger.LogAttrs(c.Request().Context(), level, "request",
				slog.String("method", v.Method), slog.String("path", loggedPath(v.URIPath)), slog.Int("status", v.Status),
				slog.Duration("latency", v.Latency), slog.String("request_id", v.RequestID), slog.String("ip", v.RemoteIP))
			return nil
		},
	})
}

// routineRequestKey marks a request a program repeats all day (an agent's
// long poll): logged at debug when it succeeds, so the log shows what changed.
const routineRequestKey = "gantry.routine-request"

// routineRequest marks the current request as routine for the request log.
func routineRequest(c echo.Context) { c.Set(routineRequestKey, true) }

// loggedPath is a request path fit for the log: a voting link's token is a
// credential (it votes as its voter for days), so it is left out.
func loggedPath(path string) string {
	if rest, ok := strings.CutPrefix(path, pageurl.VotingLinkPrefix); ok && rest != "" {
		return pageurl.VotingLinkPrefix + "…"
	}
	return path
}

// authenticate finds the caller from a bearer token or the session cookie.
// It rejects a bad bearer token at once; a stale cookie is simply ignored.
// Tokens are remembered for AuthCacheTTL (see authCache).
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		if h := c.Request().Header.Get(echo.HeaderAuthorization); h != "" {
			secret, ok := strings.CutPrefix(h, "Bearer ")
			if !ok {
				return apperr.New(apperr.Unauthorized, "Authorization header must be `Bearer <token>`.")
			}
			secret = strings.TrimSpace(secret)
			t, err := s.authCache.token(ctx, auth.HashSecret(secret), func(ctx context.Context) (*models.APIToken, error) {
				return access.BearerToken(ctx, s.DB.Bun, secret)
			})
			if errors.Is(err, models.ErrNotFound) {
				return apperr.New(apperr.Unauthorized, "The API token is unknown, revoked or expired.")
			}
			if err != nil {
				return err
			}
			c.Set(principalKey, &principal{User: t.User, Token: t})
			return next(c)
		}
		if ck, err := c.Cookie(sessionCookie); err == nil && ck.Value != "" {
			u, err := access.SessionUser(ctx, s.DB.Bun, ck.Value)
			switch {
			case err == nil:
				c.Set(principalKey, &principal{User: u, SessionSecret: ck.Value})
			case errors.Is(err, models.ErrNotFound):
				s.clearSessionCookie(c)
			default:
				return err
			}
		}
		return next(c)
	}
}

// page guards a browser page: anonymous callers are sent to sign in and
// come back afterwards; a role too low is a 403 page.
func (s *Server) page(min models.Role) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			p := principalOf(c)
			if p == nil {
				if c.Request().Method != http.MethodGet {
					return apperr.New(apperr.Unauthorized, "Sign in first.")
				}
				return c.Redirect(http.StatusSeeOther, "/login?next="+url.QueryEscape(c.Request().URL.RequestURI()))
			}
			if p.Token != nil {
				// Tokens carry scopes that pages do not check; they are for the API.
				return apperr.New(apperr.Forbidden, "Pages need a browser session; API tokens work on /api/v1.")
			}
			if !p.User.Role.Includes(min) {
				return apperr.New(apperr.Forbidden, "This needs the %s role; you are %s.", min, p.User.Role)
			}
			return next(c)
		}
	}
}

// api guards an API route for people: a caller must be authenticated, hold
// the role, and (for tokens) carry the scope.
func (s *Server) api(min models.Role, scope string) echo.MiddlewareFunc {
	return s.guard(apiGuard{people: true, role: min, scope: scope})
}

// apiClient guards an API route for the clients on gantry.yaml's allow list
// (seed 001's account allow list): a token with the scope whose owner is one
// of a client's users, or an IAM-authenticated caller from one of a client's
// AWS accounts. The client is known to the handler (leaseClientOf) and to the
// rate limit, which counts it against its own rate.
func (s *Server) apiClient(scope string) echo.MiddlewareFunc {
	return s.guard(apiGuard{clientScope: scope})
}

// apiOrClient admits people as api(min, scope) does and, failing that, a
// client as apiClient(clientScope) does. People admitted here are not
// rate-limited: these are the allocation API's reads (the pools and the
// history), which were never limited for them.
func (s *Server) apiOrClient(min models.Role, scope, clientScope string) echo.MiddlewareFunc {
	return s.guard(apiGuard{people: true, role: min, scope: scope, clientScope: clientScope, peopleUnlimited: true})
}

// apiGuard is whom an API route admits.
type apiGuard struct {
	people          bool        // people: a signed-in user or a token
	role            models.Role // the least role people need
	scope           string      // the scope people's tokens need
	clientScope     string      // the scope a client's token needs; empty: clients are not admitted
	peopleUnlimited bool        // people admitted are not rate-limited
}

func (s *Server) guard(g apiGuard) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if g.people {
				err := g.admitPerson(principalOf(c))
				if err == nil {
					if g.peopleUnlimited {
						c.Set(unlimitedKey, true)
					}
					return next(c)
				}
				if g.clientScope == "" {
					return err
				}
			}
			client, err := s.resolveLeaseClient(c, g.clientScope)
			if err != nil {
				return err
			}
			c.Set(leaseClientKey, client)
			return next(c)
		}
	}
}

func (g apiGuard) admitPerson(p *principal) error {
	if p == nil {
		return apperr.New(apperr.Unauthorized, "Send an API token as `Authorization: Bearer <token>`.")
	}
	if !p.User.Role.Includes(g.role) {
		return apperr.New(apperr.Forbidden, "This needs the %s role; the caller is %s.", g.role, p.User.Role)
	}
	if p.Token != nil && !p.Token.HasScope(g.scope) {
		return apperr.New(apperr.Forbidden, "This token lacks the %q scope.", g.scope)
	}
	return nil
}

// resolveLeaseClient finds the client on the allow list the caller acts as.
// An AWS identity wins over a token. Allow-list answers are remembered for
// AuthCacheTTL (see authCache).
func (s *Server) resolveLeaseClient(c echo.Context, scope string) (*models.Client, error) {
	ctx := c.Request().Context()
	if h := c.Request().Header.Get(AWSIdentityHeader); h != "" {
		if s.AWSIdentity == nil {
			return nil, apperr.New(apperr.Unauthorized, "AWS IAM authentication is not configured on this Gantry.")
		}
		account, err := s.AWSIdentity.VerifyAccount(ctx, h)
		var ae *apperr.Error
		if errors.As(err, &ae) {
			return nil, err // 401 for a refused signature, 503 when STS is down
		}
		if err != nil {
			return nil, apperr.New(apperr.Unauthorized, "AWS identity refused: %v", err)
		}
		client, err := s.authCache.client(ctx, "aws:"+account, func(ctx context.Context) (*models.Client, error) {
			return models.ClientOfAWSAccount(ctx, s.DB.Bun, account)
		})
		if errors.Is(err, models.ErrNotFound) {
			return nil, apperr.New(apperr.Forbidden, "AWS account %s is not on the allow list (clients in gantry.yaml).", account)
		}
		return client, err
	}
	p := principalOf(c)
	if p == nil || p.Token == nil {
		return nil, apperr.New(apperr.Unauthorized, "Send a client's API token as `Authorization: Bearer <token>`, or an AWS identity in %s.", AWSIdentityHeader)
	}
	if !p.Token.HasScope(scope) {
		return nil, apperr.New(apperr.Forbidden, "This token lacks the %q scope.", scope)
	}
	client, err := s.authCache.client(ctx, "user:"+strings.ToLower(p.User.Email), func(ctx context.Context) (*models.Client, error) {
		return models.ClientOfUser(ctx, s.DB.Bun, p.User.Email)
	})
	if errors.Is(err, models.ErrNotFound) {
		return nil, apperr.New(apperr.Forbidden, "%s is not on the allow list (clients in gantry.yaml).", p.User.Email)
	}
	return client, err
}

func leaseClientOf(c echo.Context) *models.Client {
	client, _ := c.Get(leaseClientKey).(*models.Client)
	return client
}

// apiRateLimit bounds API calls per caller: a lease client at its own rate
// from gantry.yaml (GANTRY_API_RATE when it sets none, bursts of twice the
// rate), a token at GANTRY_API_RATE with bursts of GANTRY_API_BURST, anyone
// else the same per address. A client is known only once the route's guard
// has checked it, so on the allocation routes the limit comes after the
// guard. The budget is per process: with N processes a caller gets N times
// it, which is fine for its purpose of stopping runaway scripts.
func (s *Server) apiRateLimit() echo.MiddlewareFunc {
	store := middleware.NewRateLimiterMemoryStoreWithConfig(middleware.RateLimiterMemoryStoreConfig{
		Rate: rate.Limit(s.Config.APIRate), Burst: s.Config.APIBurst, ExpiresIn: 5 * time.Minute,
	})
	perTokenOrAddress := middleware.RateLimiterWithConfig(middleware.RateLimiterConfig{
		Store: store,
		IdentifierExtractor: func(c echo.Context) (string, error) {
			if p := principalOf(c); p != nil && p.Token != nil {
				return "token:" + strconv.FormatInt(p.Token.ID, 10), nil
			}
			return "ip:" + c.RealIP(), nil
		},
		DenyHandler: func(c echo.Context, _ string, _ error) error {
			c.Response().Header().Set("Retry-After", "1")
			return apperr.New(apperr.RateLimited, "Too many requests; slow down and retry after a second.")
		},
		ErrorHandler: func(c echo.Context, err error) error { return err },
	})
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		limited := perTokenOrAddress(next)
		return func(c echo.Context) error {
			if client := leaseClientOf(c); client != nil {
				if !s.clientLimits.allow(client) {
					c.Response().Header().Set("Retry-After", "1")
					return apperr.New(apperr.RateLimited, "Client %s is over its request rate; slow down.", client.Name)
				}
				return next(c)
			}
			if unlimited, _ := c.Get(unlimitedKey).(bool); unlimited {
				return next(c)
			}
			return limited(c)
		}
	}
}

// clientLimits keeps one token bucket per lease client, per process.
type clientLimits struct {
	mu       sync.Mutex
	limiters map[string]*rate.Limiter
	def      float64
}

func (l *clientLimits) allow(client *models.Client) bool {
	r := client.Rate
	if r <= 0 {
		r = l.def
	}
	l.mu.Lock()
	lim, ok := l.limiters[client.Name]
	if !ok || lim.Limit() != rate.Limit(r) {
		lim = rate.NewLimiter(rate.Limit(r), max(1, int(2*r)))
		l.limiters[client.Name] = lim
	}
	l.mu.Unlock()
	return lim.Allow()
}

func (s *Server) setSessionCookie(c echo.Context, secret string) {
	c.SetCookie(&http.Cookie{
		Name: sessionCookie, Value: secret, Path: "/", HttpOnly: true, Secure: s.Config.SecureCookies(),
		SameSite: http.SameSiteLaxMode, Expires: time.Now().Add(s.Config.SessionTTL),
	})
}

func (s *Server) clearSessionCookie(c echo.Context) {
	c.SetCookie(&http.Cookie{Name: sessionCookie, Value: "", Path: "/", HttpOnly: true, Secure: s.Config.SecureCookies(), SameSite: http.SameSiteLaxMode, MaxAge: -1})
}
