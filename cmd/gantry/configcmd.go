package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gantryhq/gantry/internal/app"
)

func (c *cli) configCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Check and apply gantry.yaml (repositories, pools, environments, clients)",
		Long: `gantry.yaml (GANTRY_CONFIG or --config) holds what an operator commits: the
infrastructure repositories with their accounts and voters, the clients allowed
to lease environments, the pools and their environments.
serve, worker and dev apply it when they start; "apply" does it now, so a
change takes effect without a restart. Removing an environment deregisters
it: at once when nothing holds it, after its allocation ends otherwise.`,
	}
	check := &cobra.Command{
		Use: "check", Short: "Validate gantry.yaml without touching the database", Args: cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			cfg, err := c.config()
			if err != nil {
				return err
			}
			if cfg.ConfigFile == "" {
				return fmt.Errorf("no configuration file: set GANTRY_CONFIG or pass --config")
			}
			f, err := app.LoadConfig(cfg.ConfigFile, c.getenv, app.Areas())
			if err != nil {
				return err
			}
			c.printf("%s is valid: %d clients, %d pools, %d environments, %d repositories\n", cfg.ConfigFile, len(f.Clients), len(f.Pools), len(f.Environments), len(f.Repositories))
			return nil
		},
	}
	apply := &cobra.Command{
		Use: "apply", Short: "Sync gantry.yaml into the database now", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := c.openForAdmin(cmd)
			if err != nil {
				return err
			}
			defer a.Close()
			if a.Config.ConfigFile == "" {
				return fmt.Errorf("no configuration file: set GANTRY_CONFIG or pass --config")
			}
			changes, err := a.ApplyConfig(cmd.Context(), c.getenv)
			if err != nil {
				return err
			}
			c.printf("applied %s\n", a.Config.ConfigFile)
			for _, line := range changes {
				c.printf("  %s\n", line)
			}
			return nil
		},
	}
	cmd.AddCommand(check, apply)
	return cmd
}
