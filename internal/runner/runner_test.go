package runner_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantryhq/gantry/internal/runner"
)

// recorder is a Sink that keeps every chunk with the time it arrived.
type recorder struct {
	mu      sync.Mutex
	chunks  []runner.Chunk
	arrived []time.Time
}

func (r *recorder) Write(_ context.Context, c runner.Chunk) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.chunks = append(r.chunks, c)
	r.arrived = append(r.arrived, time.Now())
	return nil
}

// texts returns the texts of one stream's chunks, in order.
func (r *recorder) texts(stream string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, c := range r.chunks {
		if c.Stream == stream {
			out = append(out, c.Text)
		}
	}
	return out
}

func sh(script string) []string { return []string{"sh", "-c", script} }

// run runs cmd with a recorder and a default timeout.
func run(t *testing.T, ctx context.Context, cmd runner.Command) (runner.Result, *recorder, error) {
	t.Helper()
	if cmd.Timeout == 0 {
		cmd.Timeout = 10 * time.Second
	}
	rec := &recorder{}
	res, err := runner.Run(ctx, cmd, rec)
	return res, rec, err
}

// alive reports whether pid is a running process. A zombie counts as dead: an
// orphan killed here is reparented to PID 1, which may never reap it.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return fields[0] != "Z" && fields[0] != "X"
}

// firstPID parses the process id a script printed on its first line.
func firstPID(t *testing.T, output string) int {
	t.Helper()
	line, _, _ := strings.Cut(output, "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	require.NoError(t, err, "output: %q", output)
	return pid
}

func requireDead(t *testing.T, pid int) {
	t.Helper()
	require.Eventually(t, func() bool { return !alive(pid) }, 2*time.Second, 20*time.Millisecond,
		"process %d outlived its command", pid)
}

func TestRun_StreamsLinesInOrder(t *testing.T) {
	t.Parallel()

	res, rec, err := run(t, t.Context(), runner.Command{Argv: sh(
		`printf 'one\ntwo\n'; sleep 0.4; printf 'three\n'; sleep 0.1; echo oops >&2; sleep 0.3; printf 'four\n'`)})
	require.NoError(t, err)
	require.True(t, res.Success())

	require.Equal(t, []string{"one\ntwo\n", "three\n", "four\n"}, rec.texts(runner.StreamStdout))
	require.Equal(t, []string{"oops\n"}, rec.texts(runner.StreamStderr))
	for i, c := range rec.chunks {
		require.Equal(t, i+1, c.Seq)
		if i > 0 {
			require.False(t, c.At.Before(rec.chunks[i-1].At))
		}
	}
	// Live: the first line arrived long before the command ended.
	require.GreaterOrEqual(t, rec.arrived[len(rec.arrived)-1].Sub(rec.arrived[0]), 700*time.Millisecond)
	require.Equal(t, "one\ntwo\nthree\noops\nfour\n", res.Output)
}

func TestRun_FlushesPartialLineAfterInterval(t *testing.T) {
	t.Parallel()

	_, rec, err := run(t, t.Context(), runner.Command{Argv: sh(`printf 'Enter a value: '; sleep 1; printf 'done\n'`)})
	require.NoError(t, err)

	require.Equal(t, []string{"Enter a value: ", "done\n"}, rec.texts(runner.StreamStdout))
	gap := rec.chunks[1].At.Sub(rec.chunks[0].At)
	require.GreaterOrEqual(t, gap, 500*time.Millisecond, "the prompt must not wait for its newline")
}

func TestRun_CutsLongLines(t *testing.T) {
	t.Parallel()

	// An odd prefix puts the two-byte runes across the MaxChunkSize cuts.
	res, rec, err := run(t, t.Context(), runner.Command{Argv: sh(
		`printf x; i=0; while [ $i -lt 20000 ]; do printf 'é'; i=$((i+1)); done; echo`)})
	require.NoError(t, err)

	want := "x" + strings.Repeat("é", 20000) + "\n"
	chunks := rec.texts(runner.StreamStdout)
	require.Greater(t, len(chunks), 2)
	for _, c := range chunks {
		require.LessOrEqual(t, len(c), runner.MaxChunkSize)
	}
	require.Equal(t, want, strings.Join(chunks, ""))
	require.Equal(t, want, res.Output)
}

func TestRun_RedactsSecrets(t *testing.T) {
	t.Parallel()

	res, rec, err := run(t, t.Context(), runner.Command{
		Argv: sh(`echo "pw=hunter2 db=$DB_PASSWORD aws=$AWS_SECRET_ACCESS_KEY gh=$GITHUB_TOKEN plain=$REGION"; echo "$DB_PASSWORD" >&2`),
		Env: []string{
			"DB_PASSWORD=s3cr3t-pw",
			"AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG",
			"GITHUB_TOKEN=ghp_abcdefghijklmnop",
			"REGION=eu-west-1",
		},
		Secrets: []string{"hunter2"},
	})
	require.NoError(t, err)

	require.Equal(t, []string{"pw=**** db=**** aws=**** gh=**** plain=eu-west-1\n"}, rec.texts(runner.StreamStdout))
	require.Equal(t, []string{"****\n"}, rec.texts(runner.StreamStderr))
	for _, secret := range []string{"hunter2", "s3cr3t-pw", "wJalrXUtnFEMI", "ghp_abc"} {
		require.NotContains(t, res.Output, secret)
	}
}

func TestRun_RedactsSecretSplitAcrossChunks(t *testing.T) {
	t.Parallel()

	t.Run("split by a pause longer than the flush interval", func(t *testing.T) {
		t.Parallel()

		res, rec, err := run(t, t.Context(), runner.Command{
			Argv:    sh(`printf 'token=hun'; sleep 0.6; printf 'ter2 end\n'`),
			Secrets: []string{"hunter2"},
		})
		require.NoError(t, err)

		chunks := rec.texts(runner.StreamStdout)
		require.Equal(t, []string{"token=", "**** end\n"}, chunks)
		require.Equal(t, "token=**** end\n", res.Output)
	})

	t.Run("split by the chunk size", func(t *testing.T) {
		t.Parallel()

		res, rec, err := run(t, t.Context(), runner.Command{
			Argv:    sh(`head -c 16380 /dev/zero | tr '\0' a; printf 'hunter2\n'`),
			Secrets: []string{"hunter2"},
		})
		require.NoError(t, err)

		want := strings.Repeat("a", 16380) + "****\n"
		require.Equal(t, want, strings.Join(rec.texts(runner.StreamStdout), ""))
		require.Equal(t, want, res.Output)
	})

	t.Run("a multi-line secret and its lines", func(t *testing.T) {
		t.Parallel()

		key := "-----BEGIN KEY-----\nMIIEvQIBADANBgkqhkiG\n-----END KEY-----"
		res, _, err := run(t, t.Context(), runner.Command{
			Argv: sh(`printf '%s\n' "$DEPLOY_PRIVATE_KEY"; printf '  key: %s\n' "$(echo "$DEPLOY_PRIVATE_KEY" | sed -n 2p)"`),
			Env:  []string{"DEPLOY_PRIVATE_KEY=" + key},
		})
		require.NoError(t, err)
		require.Equal(t, "****\n  key: ****\n", res.Output)
	})
}

func TestRun_TimeoutKillsProcessGroup(t *testing.T) {
	t.Parallel()

	t.Run("SIGTERM", func(t *testing.T) {
		t.Parallel()

		res, _, err := run(t, t.Context(), runner.Command{
			Argv:    sh(`sleep 100 & echo $!; wait`),
			Timeout: 300 * time.Millisecond,
		})
		require.NoError(t, err, "a timeout is a result, not an error")
		require.True(t, res.TimedOut)
		require.False(t, res.Cancelled)
		require.False(t, res.Success())
		require.Equal(t, -1, res.ExitCode)
		require.Equal(t, "terminated", res.Signal)
		require.Less(t, res.Duration, 3*time.Second)
		requireDead(t, firstPID(t, res.Output))
	})

	t.Run("SIGKILL after the grace when SIGTERM is ignored", func(t *testing.T) {
		t.Parallel()

		// The ignored SIGTERM is inherited by the grandchild too.
		res, _, err := run(t, t.Context(), runner.Command{
			Argv:      sh(`trap '' TERM; sleep 100 & echo $!; wait`),
			Timeout:   300 * time.Millisecond,
			KillGrace: 500 * time.Millisecond,
		})
		require.NoError(t, err)
		require.True(t, res.TimedOut)
		require.Equal(t, "killed", res.Signal)
		require.GreaterOrEqual(t, res.Duration, 800*time.Millisecond)
		require.Less(t, res.Duration, 4*time.Second)
		requireDead(t, firstPID(t, res.Output))
	})
}

func TestRun_StopsLeftoverProcessesAfterExit(t *testing.T) {
	t.Parallel()

	// The shell exits at once; the background sleep keeps stdout open.
	res, _, err := run(t, t.Context(), runner.Command{
		Argv:      sh(`sleep 100 & echo $!`),
		KillGrace: time.Second,
	})
	require.NoError(t, err)
	require.True(t, res.Success())
	require.Less(t, res.Duration, 3*time.Second)
	requireDead(t, firstPID(t, res.Output))
}

func TestRun_Cancel(t *testing.T) {
	t.Parallel()

	t.Run("while running", func(t *testing.T) {
		t.Parallel()

		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(300*time.Millisecond, cancel)
		res, rec, err := run(t, ctx, runner.Command{Argv: sh(`sleep 100 & echo $!; wait`)})
		require.ErrorIs(t, err, context.Canceled)
		require.True(t, res.Cancelled)
		require.False(t, res.TimedOut)
		require.False(t, res.Success())
		require.Less(t, res.Duration, 3*time.Second)
		requireDead(t, firstPID(t, res.Output))
		require.NotEmpty(t, rec.chunks, "output before the cancel still reaches the sink")
	})

	t.Run("output while stopping still reaches the sink", func(t *testing.T) {
		t.Parallel()

		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(300*time.Millisecond, cancel)
		_, rec, err := run(t, ctx, runner.Command{
			Argv: sh(`trap 'echo shutting down; exit 1' TERM; echo started; while :; do sleep 0.05; done`),
		})
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, []string{"started\n", "shutting down\n"}, rec.texts(runner.StreamStdout))
	})

	t.Run("before the start", func(t *testing.T) {
		t.Parallel()

		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		res, rec, err := run(t, ctx, runner.Command{Argv: []string{"true"}})
		require.ErrorIs(t, err, context.Canceled)
		require.True(t, res.Cancelled)
		require.Empty(t, rec.chunks)
	})
}

func TestRun_ExitCodes(t *testing.T) {
	t.Parallel()

	for _, code := range []int{0, 1, 3, 127} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			t.Parallel()

			res, _, err := run(t, t.Context(), runner.Command{Argv: sh("exit " + strconv.Itoa(code))})
			require.NoError(t, err, "a non-zero exit is a result, not an error")
			require.Equal(t, code, res.ExitCode)
			require.Equal(t, code == 0, res.Success())
			require.Empty(t, res.Signal)
		})
	}
}

// Not parallel: t.Setenv.
func TestRun_EnvironmentIsMinimal(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://gantry:secret@db/gantry")
	t.Setenv("GANTRY_TEST_LEAK", "leaked")

	res, _, err := run(t, t.Context(), runner.Command{
		Argv: []string{"env"},
		Env:  []string{"TF_IN_AUTOMATION=1", "LANG=en_US.UTF-8"},
	})
	require.NoError(t, err)

	vars := map[string]string{}
	for line := range strings.Lines(res.Output) {
		name, value, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "=")
		vars[name] = value
	}
	require.Equal(t, "1", vars["TF_IN_AUTOMATION"])
	require.Equal(t, "en_US.UTF-8", vars["LANG"], "an Env entry overrides the base")
	require.Equal(t, os.Getenv("PATH"), vars["PATH"])
	delete(vars, "TF_IN_AUTOMATION")
	delete(vars, "LANG")
	delete(vars, "PATH")
	delete(vars, "HOME")
	require.Empty(t, vars, "nothing else of Gantry's environment reaches the command")
}

func TestRun_Stdin(t *testing.T) {
	t.Parallel()

	res, _, err := run(t, t.Context(), runner.Command{Argv: []string{"cat"}, Stdin: strings.NewReader("plan file\n")})
	require.NoError(t, err)
	require.Equal(t, "plan file\n", res.Output)

	res, _, err = run(t, t.Context(), runner.Command{Argv: []string{"cat"}})
	require.NoError(t, err)
	require.Empty(t, res.Output, "no Stdin means empty input, not Gantry's stdin")
}

func TestRun_ResolvesExecutable(t *testing.T) {
	t.Parallel()

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tool"), []byte("#!/bin/sh\necho tool in \"$PWD\"\n"), 0o755))

	t.Run("relative to Dir", func(t *testing.T) {
		t.Parallel()

		res, _, err := run(t, t.Context(), runner.Command{Argv: []string{"./tool"}, Dir: dir})
		require.NoError(t, err)
		require.Equal(t, "tool in "+dir+"\n", res.Output)
	})

	t.Run("in the command's own PATH", func(t *testing.T) {
		t.Parallel()

		res, _, err := run(t, t.Context(), runner.Command{Argv: []string{"tool"}, Dir: dir, Env: []string{"PATH=" + dir + ":/usr/bin:/bin"}})
		require.NoError(t, err)
		require.Equal(t, "tool in "+dir+"\n", res.Output)
	})
}

func TestRun_InvalidCommands(t *testing.T) {
	t.Parallel()

	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))

	tests := []struct {
		name string
		cmd  runner.Command
		want string
	}{
		{"empty argv", runner.Command{Timeout: time.Second}, "Argv is empty"},
		{"empty program", runner.Command{Argv: []string{""}, Timeout: time.Second}, "Argv[0] is empty"},
		{"not found", runner.Command{Argv: []string{"no-such-tool-gantry"}, Timeout: time.Second}, "executable file not found"},
		{"not executable", runner.Command{Argv: []string{file}, Timeout: time.Second}, "permission denied"},
		{"no timeout", runner.Command{Argv: []string{"true"}}, "Timeout must be positive"},
		{"missing dir", runner.Command{Argv: []string{"true"}, Dir: "/no/such/dir", Timeout: time.Second}, "no such file"},
		{"dir is a file", runner.Command{Argv: []string{"true"}, Dir: file, Timeout: time.Second}, "is not a directory"},
		{"env without =", runner.Command{Argv: []string{"true"}, Env: []string{"s3cr3t"}, Timeout: time.Second}, "has no '='"},
		{"NUL in argument", runner.Command{Argv: []string{"echo", "a\x00b"}, Timeout: time.Second}, "NUL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			res, err := runner.Run(t.Context(), tt.cmd, nil)
			require.ErrorIs(t, err, runner.ErrInvalidCommand)
			require.ErrorContains(t, err, tt.want)
			require.NotContains(t, err.Error(), "s3cr3t")
			require.Equal(t, -1, res.ExitCode)
		})
	}
}

func TestRun_SinkFailureStopsCommand(t *testing.T) {
	t.Parallel()

	errFull := errors.New("disk full")
	calls := 0
	sink := runner.SinkFunc(func(context.Context, runner.Chunk) error {
		calls++
		return errFull
	})
	res, err := runner.Run(t.Context(), runner.Command{Argv: sh(`echo hi; sleep 100`), Timeout: 10 * time.Second}, sink)
	require.ErrorIs(t, err, errFull)
	require.Equal(t, 1, calls, "no writes after the first failure")
	require.False(t, res.Success())
	require.Less(t, res.Duration, 3*time.Second)
	require.Equal(t, "hi\n", res.Output)
}

func TestRun_CapsOutput(t *testing.T) {
	t.Parallel()

	var want strings.Builder
	for i := 1; i <= 300000; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	total := want.Len()
	require.Greater(t, total, runner.OutputLimit)

	res, err := runner.Run(t.Context(), runner.Command{Argv: []string{"seq", "1", "300000"}, Timeout: 30 * time.Second}, nil)
	require.NoError(t, err)

	marker := fmt.Sprintf("\n[… %d bytes omitted …]\n", total-runner.OutputLimit)
	head, tail, found := strings.Cut(res.Output, marker)
	require.True(t, found, "marker %q missing", marker)
	require.Equal(t, runner.OutputLimit, len(head)+len(tail))
	require.True(t, strings.HasPrefix(want.String(), head))
	require.True(t, strings.HasSuffix(want.String(), tail))
}

func TestCommand_String(t *testing.T) {
	t.Parallel()

	cmd := runner.Command{
		Argv:    []string{"terraform", "apply", "-var", "password=hunter2", "-var", "name=it's mine", "-var", "token=" + "tok-123456"},
		Env:     []string{"TF_VAR_TOKEN=tok-123456"},
		Secrets: []string{"hunter2"},
	}
	require.Equal(t, `terraform apply -var password=**** -var 'name=it'\''s mine' -var token=****`, cmd.String())
}
