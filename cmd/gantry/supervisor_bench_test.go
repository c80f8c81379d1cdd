package main

import (
	"os/exec"
	"testing"
	"time"

	"github.com/gantryhq/gantry/internal/runner"
)

// BenchmarkCommandUnderSupervisor is what running a command costs in this
// binary (everything gantry links, so every package's start-up work runs
// again in each command's supervisor); BenchmarkCommandExec is the floor,
// os/exec alone, in the same run. docs/performance.md records both.
func BenchmarkCommandUnderSupervisor(b *testing.B) {
	for b.Loop() {
		if _, err := runner.Run(b.Context(), runner.Command{Argv: []string{"true"}, Timeout: time.Minute}, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCommandExec(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}
