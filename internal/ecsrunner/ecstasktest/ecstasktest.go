// Package ecstasktest lets a test binary be the program of ecsfake's
// tasks: the test maps the task command's "gantry" to its own executable
// (Program), and TestMain calls RunTaskIfAsked first, which runs
// `gantry ecs-task SPEC` as the real binary would and exits.
package ecstasktest

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/gantryhq/gantry/internal/ecsrunner"
)

// RunTaskIfAsked runs the task and exits when the process was started as
// `PROGRAM ecs-task SPEC`; otherwise it returns.
func RunTaskIfAsked() {
	if len(os.Args) < 2 || os.Args[1] != ecsrunner.TaskCommand {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := ecsrunner.TaskMain(ctx, os.Args[2:], os.Stdout)
	stop()
	os.Exit(code)
}

// Program maps a task command's program to this test binary.
func Program(name string) string {
	if name == "gantry" {
		exe, err := os.Executable()
		if err == nil {
			return exe
		}
	}
	return name
}
