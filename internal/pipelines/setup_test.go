package pipelines_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/pipelines"
	"github.com/gantryhq/gantry/internal/servertest"
)

// bundle is an in-test Gantry with workers and a directory where the
// pipeline's commands leave their marks.
type bundle struct {
	*servertest.Server
	svc *pipelines.Service
	ctx context.Context
	dir string
}

func setup(t *testing.T, workers bool) *bundle {
	t.Helper()
	s := servertest.Services(t)
	if workers {
		s.StartWorkers(t)
	}
	return &bundle{Server: s, svc: s.Pipelines(), ctx: t.Context(), dir: t.TempDir()}
}

// script writes an executable shell script (the step commands tests run)
// and returns its path.
func (b *bundle) script(t *testing.T, name, body string) string {
	t.Helper()
	path := filepath.Join(b.dir, name)
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755))
	return path
}

// marks are the lines the commands appended to the marks file.
func (b *bundle) marks(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(b.dir, "marks"))
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	return strings.Fields(string(data))
}

func (b *bundle) count(t *testing.T, mark string) int {
	n := 0
	for _, m := range b.marks(t) {
		if m == mark {
			n++
		}
	}
	return n
}

// mark is a step command that appends "<step>:<host>:<revision>" to the
// marks file.
func (b *bundle) mark(t *testing.T) string {
	return b.script(t, "mark.sh", fmt.Sprintf(`echo "$1:$2:$3" >> %s/marks`, b.dir))
}
