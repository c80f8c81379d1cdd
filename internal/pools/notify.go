package pools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/gantryhq/gantry/models"
)

// Notifier tells people about an environment that needs them.
type Notifier interface {
	DirtyEnvironment(ctx context.Context, pool *models.Pool, env *models.Environment, reason string) error
}

// NotifyDirty sends the dirty-environment notification of cleanup cleanupID,
// unless the environment was dealt with meanwhile.
func (s *Service) NotifyDirty(ctx context.Context, envID int64, cleanupID uuid.UUID, reason string) error {
	db := s.Queue.DB()
	env, err := models.EnvironmentByID(ctx, db, envID)
	if err != nil {
		return err
	}
	if env.Status != models.EnvDirty || env.CleanupID == nil || *env.CleanupID != cleanupID {
		return nil
	}
	pool, err := models.PoolByNameAny(ctx, db, env.Pool)
	if err != nil {
		return err
	}
	if s.Notify != nil {
		if err := s.Notify.DirtyEnvironment(ctx, pool, env, reason); err != nil {
			return err
		}
	}
	// emails names who was emailed, and is absent when nobody was.
	detail := map[string]any{"reason": reason, "webhook": pool.NotifyWebhook != ""}
	if len(pool.NotifyEmails) > 0 {
		detail["emails"] = strings.Join(pool.NotifyEmails, ",")
	}
	return models.AppendLog(ctx, db, &models.LogEntry{TargetID: Target(env), Event: EventDirtyNotification, Actor: "gantry:notify",
		Detail: detail})
}

// DirtyNotifier tells a pool's operators that an environment needs a human:
// an email to the pool's notify.emails and a JSON POST to its
// notify.webhook (the seed's ticket; point it at your ticketing system).
type DirtyNotifier struct {
	// SendMail sends a plain-text email; nil when no mail is configured.
	SendMail func(ctx context.Context, to []string, subject, body string) error
	HTTP     *http.Client
	BaseURL  string // links in the message point here
}

// dirtyWebhook is the body POSTed to notify.webhook.
type dirtyWebhook struct {
	Event       string    `json:"event"`
	Pool        string    `json:"pool"`
	Environment string    `json:"environment"`
	Account     string    `json:"account,omitempty"`
	Region      string    `json:"region,omitempty"`
	Database    string    `json:"database,omitempty"`
	Reason      string    `json:"reason"`
	URL         string    `json:"url"`
	At          time.Time `json:"at"`
}

func (n *DirtyNotifier) DirtyEnvironment(ctx context.Context, pool *models.Pool, env *models.Environment, reason string) error {
	link := fmt.Sprintf("%s/environments/%d", n.BaseURL, env.ID)
	var errs []error
	if len(pool.NotifyEmails) > 0 {
		if n.SendMail == nil {
			errs = append(errs, errors.New("pool lists notify.emails but no mail server is configured (GANTRY_SMTP_URL)"))
		} else {
			subject := fmt.Sprintf("[Gantry] Environment %s in pool %s is dirty", env.Name(), pool.Name)
			body := fmt.Sprintf("Environment %s (pool %s) needs a human: %s.\n\nIt takes no allocations until someone retries its cleanup or marks it clean:\n%s\n\nCleanup output is on that page.\n",
				env.Name(), pool.Name, reason, link)
			if err := n.SendMail(ctx, pool.NotifyEmails, subject, body); err != nil {
				errs = append(errs, fmt.Errorf("emailing %v: %w", pool.NotifyEmails, err))
			}
		}
	}
	if pool.NotifyWebhook != "" {
		if err := n.postWebhook(ctx, pool, env, reason, link); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (n *DirtyNotifier) postWebhook(ctx context.Context, pool *models.Pool, env *models.Environment, reason, link string) error {
	body, err := json.Marshal(dirtyWebhook{Event: "environment-dirty", Pool: pool.Name, Environment: env.Name(),
		Account: env.Account, Region: env.Region, Database: env.Database, Reason: reason, URL: link, At: time.Now().UTC()})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, pool.NotifyWebhook, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("webhook %s: %w", pool.NotifyWebhook, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "gantry")
	client := n.HTTP
	if client == nil {
		client = http.DefaultClient
	}
	res, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("webhook %s: %w", pool.NotifyWebhook, err)
	}
	res.Body.Close()
	if res.StatusCode >= 300 {
		return fmt.Errorf("webhook %s answered %s", pool.NotifyWebhook, res.Status)
	}
	return nil
}
