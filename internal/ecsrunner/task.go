package ecsrunner

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/gantryhq/gantry/internal/gitrepo"
	"github.com/gantryhq/gantry/internal/runner"
)

// TaskCommand is the subcommand of gantry that runs inside the task.
const TaskCommand = "ecs-task"

// Spec is what one task does, passed as the JSON argument of
// `gantry ecs-task`.
type Spec struct {
	Repo   string   `json:"repo"`
	Commit string   `json:"commit"`
	Unit   string   `json:"unit"`
	Init   []string `json:"init,omitempty"`
	Main   []string `json:"main"`
	Store  Store    `json:"store"`
	// PlanGet is the key of the approved plan file to apply, PlanSHA256
	// its digest recorded when it was planned; PlanPut the key the plan
	// command's plan file is stored at.
	PlanGet    string `json:"plan_get,omitempty"`
	PlanSHA256 string `json:"plan_sha256,omitempty"`
	PlanPut    string `json:"plan_put,omitempty"`
	// OutputPut is the key the main command's standard output is stored
	// at when it succeeds (terraform show -json, read back by Gantry: a
	// log stream would split and interleave it); that output is then not
	// written to the log.
	OutputPut string `json:"output_put,omitempty"`
}

// Store is the plan store's bucket, region and endpoint.
type Store struct {
	Region   string `json:"region"`
	Bucket   string `json:"bucket"`
	Endpoint string `json:"endpoint,omitempty"`
}

// Command is the container command running spec.
func (s Spec) Command() ([]string, error) {
	doc, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	return []string{"gantry", TaskCommand, string(doc)}, nil
}

// taskTimeout is the in-task limit of one command: ECS's side (Runner)
// enforces the real one with StopTask, whose SIGTERM cancels ctx.
const taskTimeout = 24 * time.Hour

// TaskMain is `gantry ecs-task SPEC` inside the task: it returns the exit
// code of the task, which is the main command's, or ExitSetup or ExitInit.
// Output goes to stdout, which the awslogs driver sends to CloudWatch.
func TaskMain(ctx context.Context, args []string, stdout io.Writer) int {
	fail := func(format string, a ...any) int {
		if ctx.Err() != nil {
			// ECS's SIGTERM (StopTask): exit as a process it ended would.
			fmt.Fprintln(stdout, "gantry ecs-task: stopped")
			return ExitStopped
		}
		fmt.Fprintf(stdout, "gantry ecs-task: "+format+"\n", a...)
		return ExitSetup
	}
	if len(args) != 1 {
		return fail("usage: gantry %s SPEC (one JSON argument)", TaskCommand)
	}
	var spec Spec
	if err := json.Unmarshal([]byte(args[0]), &spec); err != nil {
		return fail("reading the spec: %v", err)
	}
	ws, err := os.MkdirTemp("", "gantry-task-")
	if err != nil {
		return fail("%v", err)
	}
	defer os.RemoveAll(ws)
	git := &gitrepo.Cache{Dir: filepath.Join(ws, "git")}
	mirror, err := git.Fetch(ctx, spec.Repo, spec.Commit)
	if err != nil {
		return fail("fetching %s: %v", spec.Commit, err)
	}
	checkout := filepath.Join(ws, "checkout")
	if err := mirror.Checkout(ctx, spec.Commit, checkout); err != nil {
		return fail("checking %s out: %v", spec.Commit, err)
	}
	dir, err := runner.SafePath(checkout, spec.Unit)
	if err != nil {
		return fail("unit %s: %v", spec.Unit, err)
	}
	planFile := filepath.Join(ws, "plan.tfplan")
	var store *s3.Client
	if spec.PlanGet != "" || spec.PlanPut != "" || spec.OutputPut != "" {
		cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(spec.Store.Region))
		if err != nil {
			return fail("AWS configuration for the plan store: %v", err)
		}
		store = NewS3(cfg, spec.Store.Endpoint)
	}
	if spec.PlanGet != "" {
		data, err := GetObject(ctx, store, spec.Store.Bucket, spec.PlanGet)
		if err != nil {
			return fail("fetching the approved plan file: %v", err)
		}
		if got := SHA256(data); got != spec.PlanSHA256 {
			return fail("the plan file at s3://%s/%s has SHA-256 %s, not %s as approved: refusing to apply it", spec.Store.Bucket, spec.PlanGet, got, spec.PlanSHA256)
		}
		if err := os.WriteFile(planFile, data, 0o600); err != nil {
			return fail("%v", err)
		}
		fmt.Fprintf(stdout, "gantry ecs-task: applying the approved plan file s3://%s/%s (SHA-256 %s)\n", spec.Store.Bucket, spec.PlanGet, spec.PlanSHA256)
	}
	env := append(os.Environ(), "TF_IN_AUTOMATION=1", "TF_INPUT=0")
	sink := runner.SinkFunc(func(_ context.Context, c runner.Chunk) error {
		_, err := io.WriteString(stdout, c.Text)
		return err
	})
	expand := func(template []string) []string {
		argv := make([]string, len(template))
		for i, a := range template {
			argv[i] = strings.ReplaceAll(strings.ReplaceAll(a, "{dir}", dir), "{plan_file}", planFile)
		}
		return argv
	}
	if len(spec.Init) > 0 {
		res, err := runner.Run(ctx, runner.Command{Argv: expand(spec.Init), Dir: checkout, Env: env, Timeout: taskTimeout}, sink)
		if err != nil {
			return fail("init: %v", err)
		}
		if !res.Success() {
			fmt.Fprintf(stdout, "gantry ecs-task: init failed (exit code %d)\n", res.ExitCode)
			return ExitInit
		}
	}
	mainSink, captured := sink, &bytes.Buffer{}
	if spec.OutputPut != "" {
		mainSink = runner.SinkFunc(func(ctx context.Context, c runner.Chunk) error {
			if c.Stream == runner.StreamStdout {
				_, err := captured.WriteString(c.Text)
				return err
			}
			return sink.Write(ctx, c)
		})
	}
	res, err := runner.Run(ctx, runner.Command{Argv: expand(spec.Main), Dir: checkout, Env: env, Timeout: taskTimeout}, mainSink)
	if err != nil {
		return fail("%v", err)
	}
	if spec.OutputPut != "" && res.ExitCode == 0 {
		if err := PutObject(ctx, store, spec.Store.Bucket, spec.OutputPut, captured.Bytes()); err != nil {
			return fail("storing the output: %v", err)
		}
		fmt.Fprintf(stdout, "gantry ecs-task: stored the output (%d bytes) at s3://%s/%s\n", captured.Len(), spec.Store.Bucket, spec.OutputPut)
	}
	if spec.PlanPut != "" && (res.ExitCode == 0 || res.ExitCode == 2) {
		data, err := os.ReadFile(planFile)
		switch {
		case errors.Is(err, os.ErrNotExist):
			// a plan without changes may write none; Gantry asks for it only with changes
		case err != nil:
			return fail("%v", err)
		default:
			if err := PutObject(ctx, store, spec.Store.Bucket, spec.PlanPut, data); err != nil {
				return fail("storing the plan file: %v", err)
			}
			fmt.Fprintf(stdout, "gantry ecs-task: stored the plan file at s3://%s/%s (SHA-256 %s)\n", spec.Store.Bucket, spec.PlanPut, SHA256(data))
		}
	}
	return res.ExitCode
}

// SHA256 is the hex digest of data.
func SHA256(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// GetObject reads one object of the plan store.
func GetObject(ctx context.Context, c *s3.Client, bucket, key string) ([]byte, error) {
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key})
	if err != nil {
		return nil, fmt.Errorf("S3 GetObject s3://%s/%s: %w", bucket, key, err)
	}
	defer out.Body.Close()
	return io.ReadAll(out.Body)
}

// PutObject stores one object in the plan store, with its SHA-256 as
// metadata for whoever looks at the bucket.
func PutObject(ctx context.Context, c *s3.Client, bucket, key string, data []byte) error {
	_, err := c.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &bucket, Key: &key, Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
		Metadata: map[string]string{"sha256": SHA256(data)},
	})
	if err != nil {
		return fmt.Errorf("S3 PutObject s3://%s/%s: %w", bucket, key, err)
	}
	return nil
}

// Plan reads a plan file the plan task stored at key of the store.
func (r *Runner) Plan(ctx context.Context, key string) ([]byte, error) {
	bucket, _ := r.cfg.Store()
	return GetObject(ctx, r.s3, bucket, key)
}

// Output reads what a task stored at key of the store for Spec.OutputPut.
func (r *Runner) Output(ctx context.Context, key string) ([]byte, error) {
	return r.Plan(ctx, key)
}

// PlanKey is the store's key of a plan file named name
// ("EXECUTION/plan-ATTEMPT.tfplan").
func (r *Runner) PlanKey(name string) string {
	_, prefix := r.cfg.Store()
	if prefix == "" {
		return name
	}
	return prefix + "/" + name
}

// StoreOf is the Store a task of r uses.
func (r *Runner) StoreOf() Store {
	bucket, _ := r.cfg.Store()
	return Store{Region: r.cfg.Region, Bucket: bucket, Endpoint: r.cfg.Endpoints.S3}
}
