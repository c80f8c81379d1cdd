package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gantryhq/gantry/internal/ecsrunner"
)

// ecsTaskCommand is what an ECS task of a repository with runs_on: ecs
// runs (docs/areas/infra-ecs.md): Gantry passes the spec; the task's exit
// code is the command's. ECS's SIGTERM (StopTask) cancels the context,
// which stops the command.
func (c *cli) ecsTaskCommand() *cobra.Command {
	return &cobra.Command{
		Use:    ecsrunner.TaskCommand + " SPEC",
		Short:  "Run one unit's commands inside an ECS task (started by Gantry)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := ecsrunner.TaskMain(cmd.Context(), args, c.stdout); code != 0 {
				return &exitError{code: code, msg: fmt.Sprintf("the task's command ended with exit code %d", code)}
			}
			return nil
		},
	}
}
