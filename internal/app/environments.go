package app

import (
	"context"

	"golang.org/x/sync/semaphore"

	"github.com/gantryhq/gantry/internal/demo"
	"github.com/gantryhq/gantry/internal/gantryfile"
	"github.com/gantryhq/gantry/internal/mail"
	"github.com/gantryhq/gantry/internal/pools"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/web"
)

// environmentsArea is environment pools (seed 001):
// docs/areas/environments.md.
var environmentsArea = Area{Name: "environments", Build: func(_ context.Context, d *Deps) (*Parts, error) {
	notifier := &pools.DirtyNotifier{BaseURL: d.Config.BaseURL.String(), HTTP: d.HTTPClient}
	if d.Mail != nil {
		notifier.SendMail = func(ctx context.Context, to []string, subject, body string) error {
			return d.Mail.Send(ctx, mail.Message{To: to, Subject: subject, Text: body})
		}
	}
	postgres := &pools.PostgresKind{Getenv: d.Getenv}
	svc := &pools.Service{
		Queue: d.Queue, Logger: d.Logger, Retention: d.Config.Retention, Notify: notifier,
		Admission: semaphore.NewWeighted(int64(d.Config.AllocationConcurrency)), HeartbeatInterval: d.Config.HeartbeatInterval,
		Kinds: map[string]pools.Kind{
			gantryfile.KindPostgres: postgres,
			gantryfile.KindSlot:     pools.SlotKind{},
			gantryfile.KindAWS:      pools.AWSKind{Provider: d.AWS},
		},
		Metrics: pools.NewMetrics(d.Registry, d.DB),
	}
	jobsArea := jobs.EnvironmentsArea(svc, d.Logger)
	return &Parts{
		Service: svc,
		Config: &ConfigSection{Sync: func(ctx context.Context, f *gantryfile.File, actor string) ([]string, error) {
			res, err := svc.Sync(ctx, f, actor)
			changes := changeLines("registered", "", res.Registered, "")
			changes = append(changes, changeLines("deregistering", "", res.Deregistering, " (leaves when its allocation ends)")...)
			return append(changes, changeLines("deregistered", "", res.Deregistered, "")...), err
		}},
		Jobs:  &jobsArea,
		Web:   web.EnvironmentsArea(svc),
		Demo:  func(ctx context.Context) (bool, error) { return demo.Environments(ctx, d.DB.Bun, svc) },
		Close: postgres.Close,
	}, nil
}}
