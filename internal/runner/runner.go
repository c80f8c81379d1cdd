// Package runner runs external commands (terraform, terragrunt, cleanup
// tools, plugins, host deploy steps) the one way Gantry allows: an argument
// vector, never a shell string; a minimal environment; a timeout and
// cancellation that stop the command's whole process group; output streamed
// in line-oriented chunks to a Sink (the caller persists them, e.g. into
// PostgreSQL for the live view) with secrets redacted.
//
// The package does no I/O of its own beyond the process and its pipes.
package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

const (
	// FlushInterval is how long a partial line (output without a trailing
	// newline yet, such as a prompt or a progress dot) waits before it is
	// sent as a chunk of its own.
	FlushInterval = 250 * time.Millisecond
	// MaxChunkSize is the largest Chunk.Text in bytes; a longer line is cut.
	MaxChunkSize = 16 << 10
	// OutputLimit caps Result.Output; the middle of longer output is omitted.
	OutputLimit = 1 << 20
	// DefaultKillGrace is the time between SIGTERM and SIGKILL when a command
	// is stopped and Command.KillGrace is zero.
	DefaultKillGrace = 5 * time.Second
)

// The values of Chunk.Stream.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

const (
	// sinkWriteTimeout bounds one Sink.Write.
	sinkWriteTimeout = 10 * time.Second
	// drainTimeout is how long output is still read once the process group
	// is gone, for a descendant that left the group (setsid) but holds the
	// output pipes open.
	drainTimeout = 2 * time.Second
	// readSize is the most read from a pipe at once.
	readSize = 32 << 10
)

// ErrInvalidCommand is wrapped by every error about a Command that cannot be
// run as given (empty Argv, executable not found, missing Dir, …).
var ErrInvalidCommand = errors.New("invalid command")

// Command is one external command to run.
type Command struct {
	// Argv is the program and its arguments. Argv[0] is looked up in the
	// command's PATH (see Env) unless it contains a slash; a relative path
	// with a slash is relative to Dir.
	Argv []string
	// Dir is the working directory; it must exist. Empty means Gantry's own
	// working directory.
	Dir string
	// Env is added to the base environment of PATH, HOME and LANG (taken
	// from Gantry's process). Nothing else of Gantry's environment is passed
	// on. A later entry overrides an earlier one or a base entry. Values of
	// entries whose names look secret (see SecretEnvName) are redacted.
	Env []string
	// Timeout is how long the command may run; it must be positive.
	Timeout time.Duration
	// KillGrace is the time between SIGTERM and SIGKILL when the command is
	// stopped; zero means DefaultKillGrace.
	KillGrace time.Duration
	// Secrets are values replaced by "****" in the output.
	Secrets []string
	// Stdin is the command's standard input; nil means empty input.
	Stdin io.Reader
}

// String returns the command line for display, shell-quoted, with secrets
// redacted.
func (c Command) String() string {
	quoted := make([]string, len(c.Argv))
	for i, a := range c.Argv {
		quoted[i] = quoteArg(a)
	}
	return newRedactor(secretsOf(c)).redactString(strings.Join(quoted, " "))
}

// Chunk is a piece of a command's output: one or more complete lines, or a
// partial line that waited FlushInterval or reached MaxChunkSize. Text is
// redacted, valid UTF-8 and free of NUL bytes, so it can be stored as is.
//
// Each stream's chunks keep the command's order. Between stdout and stderr
// the order is the one in which Gantry read them: two writes to different
// streams in quick succession may be seen in either order.
type Chunk struct {
	Stream string // StreamStdout or StreamStderr
	Seq    int    // 1, 2, 3, … across both streams, in delivery order
	Text   string
	At     time.Time
}

// Sink receives the output of a command while it runs. Write is called from
// one goroutine at a time, in Seq order. Its ctx carries the values of Run's
// ctx but not its cancellation, so that what a command prints while it is
// being stopped is still recorded; each call is bounded by a timeout of its
// own, which Write must honour. An error stops the command and is returned
// by Run.
type Sink interface {
	Write(ctx context.Context, chunk Chunk) error
}

// SinkFunc adapts a function to a Sink.
type SinkFunc func(ctx context.Context, chunk Chunk) error

// Write calls f.
func (f SinkFunc) Write(ctx context.Context, chunk Chunk) error { return f(ctx, chunk) }

// Result is the outcome of a command that ran.
type Result struct {
	// ExitCode is the exit status, or -1 if the process was ended by a
	// signal or never started.
	ExitCode int
	// Signal names the signal that ended the process ("terminated",
	// "killed"), if one did.
	Signal   string
	Duration time.Duration
	// TimedOut is set when Command.Timeout stopped the command.
	TimedOut bool
	// Cancelled is set when Run's ctx stopped the command.
	Cancelled bool
	// Output is the redacted combined output in delivery order, at most
	// OutputLimit bytes plus a "[… N bytes omitted …]" marker in the middle.
	Output string
}

// Success reports whether the command ran to the end and exited 0.
func (r Result) Success() bool {
	return r.ExitCode == 0 && !r.TimedOut && !r.Cancelled
}

// Run runs cmd, streaming its output to sink (nil discards it; Result.Output
// has it either way), and returns when the command's process group is gone.
//
// A command that exits non-zero or times out is not an error: see Result.
// Run returns an error when cmd is invalid (wrapping ErrInvalidCommand), when
// the process cannot be started, when sink fails (the command is stopped),
// and when ctx ends first (Result.Cancelled is set too; the error wraps
// ctx's cause, so a worker that returns it is retried rather than recording
// a failed command).
//
// The command runs under a supervisor (supervisor.go). On timeout or
// cancellation its whole process group, and on Linux every descendant that
// left the group, gets SIGTERM, and SIGKILL after the grace period. When the
// command exits by itself, any process it left behind is stopped the same
// way, and so is the whole tree when Gantry itself dies (kill -9 included):
// a command's processes never outlive Run, nor Gantry.
func Run(ctx context.Context, cmd Command, sink Sink) (Result, error) {
	notRun := Result{ExitCode: -1}
	p, err := prepare(cmd)
	if err != nil {
		return notRun, err
	}
	name := cmd.Argv[0]
	if ctx.Err() != nil {
		notRun.Cancelled = true
		return notRun, fmt.Errorf("running %s: %w", name, context.Cause(ctx))
	}

	outR, outW, err := os.Pipe()
	if err != nil {
		return notRun, fmt.Errorf("creating stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(outR, outW)
		return notRun, fmt.Errorf("creating stderr pipe: %w", err)
	}
	// The supervisor's control and report pipes (see supervisor.go). Gantry
	// holds the control pipe's write end until the command is over: when
	// Gantry dies, the kernel closes it, and the supervisor stops the tree.
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		closeAll(outR, outW, errR, errW)
		return notRun, fmt.Errorf("creating control pipe: %w", err)
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		closeAll(outR, outW, errR, errW, ctlR, ctlW)
		return notRun, fmt.Errorf("creating report pipe: %w", err)
	}
	defer closeAll(outR, errR, ctlW, repR)

	self, err := executable()
	if err != nil {
		closeAll(outW, errW, ctlR, repW)
		return notRun, fmt.Errorf("finding Gantry's executable to supervise %s: %w", name, err)
	}
	c := &exec.Cmd{
		Path:        self,
		Args:        supervisorArgs(p.grace, p.path, cmd.Argv),
		Dir:         cmd.Dir,
		Env:         append(p.env, supervisorEnv+"=1"),
		Stdin:       cmd.Stdin,
		Stdout:      outW,
		Stderr:      errW,
		ExtraFiles:  []*os.File{ctlR, repW}, // controlFD, reportFD
		SysProcAttr: supervisorProcAttr(),
		// Bounds Wait's copying of a Stdin that never ends.
		WaitDelay: p.grace,
	}
	start := time.Now()
	err = c.Start()
	closeAll(outW, errW, ctlR, repW)
	if err != nil {
		return notRun, fmt.Errorf("starting %s: %w", name, err)
	}

	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = c.Wait()
		close(exited)
	}()
	reports := readReports(repR)
	first, ok := <-reports
	if !ok || first.StartErr != "" {
		<-exited
		if !ok {
			return notRun, fmt.Errorf("starting %s: %w", name, errors.Join(errNoReport, waitErr))
		}
		return notRun, fmt.Errorf("starting %s: %s", name, first.StartErr)
	}

	// On a timeout, a cancellation or output that cannot be stored, the
	// supervisor is asked to stop the command's processes; it reports and
	// exits once they are gone, as it does when the command exits.
	abort := make(chan struct{})
	stopped := make(chan struct{})
	var reason stopReason
	go func() {
		defer close(stopped)
		timeout := time.NewTimer(cmd.Timeout)
		defer timeout.Stop()
		select {
		case <-exited:
			return
		case <-ctx.Done():
			reason = stopCancelled
		case <-timeout.C:
			reason = stopTimedOut
		case <-abort:
			reason = stopAborted
		}
		_, _ = io.WriteString(ctlW, stopRequest+"\n")
		// Should the supervisor not manage it (it cannot be, short of a
		// bug), its command's group is killed from here.
		backstop := time.NewTimer(p.grace + supervisorSlack)
		defer backstop.Stop()
		select {
		case <-exited:
		case <-backstop.C:
			killSupervised(c.Process, first.PID)
		}
	}()

	out, sinkErr := pump(ctx, [2]*os.File{outR, errR}, p.secrets, sink, stopped, abort)

	<-stopped
	<-exited
	last, reported := <-reports
	res := Result{
		ExitCode:  -1,
		Duration:  time.Since(start),
		TimedOut:  reason == stopTimedOut,
		Cancelled: reason == stopCancelled,
		Output:    out,
	}
	if reported && last.Exited {
		res.ExitCode, res.Signal = last.result()
	} else if ps := c.ProcessState; ps != nil {
		res.Signal = signalName(ps)
	}
	var exitErr *exec.ExitError
	switch {
	case sinkErr != nil:
		return res, fmt.Errorf("writing output of %s: %w", name, sinkErr)
	case res.Cancelled:
		return res, fmt.Errorf("running %s: %w", name, context.Cause(ctx))
	case waitErr != nil && !errors.As(waitErr, &exitErr) && !errors.Is(waitErr, exec.ErrWaitDelay):
		return res, fmt.Errorf("waiting for %s: %w", name, waitErr)
	case !reported || !last.Exited:
		return res, fmt.Errorf("waiting for %s: %w", name, errors.Join(errNoReport, waitErr))
	}
	return res, nil
}

// supervisorSlack is how much longer than the kill grace a supervisor may
// take to stop its command before Run kills what it can itself.
const supervisorSlack = 10 * time.Second

// readReports decodes the supervisor's reports until the pipe ends.
func readReports(r io.Reader) <-chan supervisorReport {
	out := make(chan supervisorReport, 2)
	go func() {
		defer close(out)
		dec := json.NewDecoder(r)
		for {
			var rep supervisorReport
			if dec.Decode(&rep) != nil {
				return
			}
			out <- rep
		}
	}()
	return out
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		f.Close()
	}
}

type stopReason int

const (
	stopExited stopReason = iota
	stopCancelled
	stopTimedOut
	stopAborted
)

type prepared struct {
	path    string
	env     []string
	secrets []string
	grace   time.Duration
}

func prepare(cmd Command) (prepared, error) {
	switch {
	case len(cmd.Argv) == 0:
		return prepared{}, fmt.Errorf("%w: Argv is empty", ErrInvalidCommand)
	case cmd.Argv[0] == "":
		return prepared{}, fmt.Errorf("%w: Argv[0] is empty", ErrInvalidCommand)
	case cmd.Timeout <= 0:
		return prepared{}, fmt.Errorf("%w: Timeout must be positive, got %s", ErrInvalidCommand, cmd.Timeout)
	case cmd.KillGrace < 0:
		return prepared{}, fmt.Errorf("%w: KillGrace must not be negative, got %s", ErrInvalidCommand, cmd.KillGrace)
	}
	for i, a := range cmd.Argv {
		if strings.ContainsRune(a, 0) {
			return prepared{}, fmt.Errorf("%w: Argv[%d] contains a NUL byte", ErrInvalidCommand, i)
		}
	}
	if cmd.Dir != "" {
		fi, err := os.Stat(cmd.Dir)
		if err != nil {
			return prepared{}, fmt.Errorf("%w: Dir: %w", ErrInvalidCommand, err)
		}
		if !fi.IsDir() {
			return prepared{}, fmt.Errorf("%w: Dir %s is not a directory", ErrInvalidCommand, cmd.Dir)
		}
	}
	env, path, err := buildEnv(cmd.Env)
	if err != nil {
		return prepared{}, err
	}
	bin, err := lookPath(cmd.Argv[0], cmd.Dir, path)
	if err != nil {
		return prepared{}, fmt.Errorf("%w: %w", ErrInvalidCommand, err)
	}
	grace := cmd.KillGrace
	if grace == 0 {
		grace = DefaultKillGrace
	}
	return prepared{path: bin, env: env, secrets: secretsOf(cmd), grace: grace}, nil
}

type readEvent struct {
	stream int
	data   []byte
	eof    bool
}

// pump reads both pipes until they end, cuts and redacts the output, hands
// the chunks to sink and returns the capped combined output. On the first
// sink error it closes abort, keeps reading (so the command is not blocked
// on a full pipe while it is stopped) and returns that error.
func pump(ctx context.Context, pipes [2]*os.File, secrets []string, sink Sink, stopped <-chan struct{}, abort chan<- struct{}) (string, error) {
	events := make(chan readEvent)
	for i, f := range pipes {
		go read(f, i, events)
	}
	streams := [2]*stream{
		{name: StreamStdout, red: newRedactor(secrets)},
		{name: StreamStderr, red: newRedactor(secrets)},
	}
	out := &cappedOutput{limit: OutputLimit}
	sinkCtx := context.WithoutCancel(ctx)
	var (
		seq     int
		sinkErr error
	)
	emit := func(s *stream, text string, now time.Time) {
		if text == "" {
			return
		}
		out.write(text)
		seq++
		if sink == nil || sinkErr != nil {
			return
		}
		wctx, cancel := context.WithTimeout(sinkCtx, sinkWriteTimeout)
		defer cancel()
		if err := sink.Write(wctx, Chunk{Stream: s.name, Seq: seq, Text: text, At: now}); err != nil {
			sinkErr = err
			close(abort)
		}
	}

	flush := time.NewTimer(time.Hour)
	flush.Stop()
	defer flush.Stop()
	var drain <-chan time.Time
	for open := len(pipes); open > 0; {
		select {
		case ev := <-events:
			now := time.Now()
			s := streams[ev.stream]
			texts := s.add(ev.data, now)
			if ev.eof {
				open--
				texts = append(texts, s.finish()...)
			}
			for _, t := range texts {
				emit(s, t, now)
			}
		case now := <-flush.C:
			for _, s := range streams {
				if t, ok := s.flushPartial(now); ok {
					emit(s, t, now)
				}
			}
		case <-stopped:
			stopped = nil
			drain = time.After(drainTimeout)
		case <-drain:
			// Whatever still holds the pipes is not ours any more.
			drain = nil
			for _, f := range pipes {
				f.Close()
			}
		}
		var next time.Time
		for _, s := range streams {
			if due, ok := s.due(); ok && (next.IsZero() || due.Before(next)) {
				next = due
			}
		}
		if next.IsZero() {
			flush.Stop()
		} else {
			flush.Reset(time.Until(next))
		}
	}
	return out.String(), sinkErr
}

// read sends what it reads from f to events, then one eof event. A read
// error (the pipe closed under it) counts as the end.
func read(f *os.File, stream int, events chan<- readEvent) {
	buf := make([]byte, readSize)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			events <- readEvent{stream: stream, data: bytes.Clone(buf[:n])}
		}
		if err != nil {
			events <- readEvent{stream: stream, eof: true}
			return
		}
	}
}
