package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gantryhq/gantry/client"
)

func (c *cli) daemonsCommand() *cobra.Command {
	conn := &serverConn{cli: c, tokenHint: "an API token with the read scope, and write to change things " +
		"(create one on Gantry's /tokens page)"}
	cmd := &cobra.Command{
		Use:   "daemons",
		Short: "Manage daemon environments: one task on every matching instance",
		Long: `gantry daemons manages daemon environments (docs/areas/daemons.md) from a terminal:

  GANTRY_SERVER  Gantry's URL (or --server)
  GANTRY_TOKEN   API token with the read scope, and write to change things

  gantry daemons list                                  environments and their health
  gantry daemons show NAME                             one environment
  gantry daemons create NAME --task T --cluster C [--attr A …] [--min-healthy P] -- COMMAND ARGS…
  gantry daemons update NAME --task T [--cluster C] [--attr A …] [--min-healthy P] -- COMMAND ARGS…
  gantry daemons diff NAME VERSION_ID                  what deploying the version would change
  gantry daemons deploy NAME VERSION_ID                start a deployment
  gantry daemons rollback NAME [VERSION_ID]            deploy the previous (or named) version
  gantry daemons stop NAME                             halt the deployment in progress
  gantry daemons deployments NAME                      deployments, latest first
  gantry daemons delete NAME

Run machines' tasks with gantry agent.`,
	}
	conn.addFlags(cmd, true)

	list := &cobra.Command{Use: "list", Short: "List daemon environments", Args: cobra.NoArgs}
	listOut := outputFlag(list)
	list.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := checkOutput(listOut); err != nil {
			return err
		}
		api, err := conn.tokenClient()
		if err != nil {
			return err
		}
		envs, err := api.DaemonEnvironments(cmd.Context())
		if err != nil {
			return err
		}
		if *listOut == "json" {
			return c.printJSON(envs)
		}
		w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "NAME\tSTATE\tHEALTH\tTASKS\tVERSION\tDEPLOYMENT")
		for _, e := range envs {
			version, deployment := "-", "-"
			if e.DeployedVersion != nil {
				version = fmt.Sprintf("v%d", e.DeployedVersion.Number)
			}
			if e.ActiveDeployment != nil {
				deployment = e.ActiveDeployment.State + " " + e.ActiveDeployment.ID
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", e.Name, e.State, e.Health, e.HealthLine, version, deployment)
		}
		return w.Flush()
	}

	show := &cobra.Command{Use: "show NAME", Short: "Show one daemon environment", Args: cobra.ExactArgs(1)}
	show.RunE = func(cmd *cobra.Command, args []string) error {
		api, err := conn.tokenClient()
		if err != nil {
			return err
		}
		e, err := api.DaemonEnvironment(cmd.Context(), args[0])
		if err != nil {
			return err
		}
		return c.printJSON(e)
	}

	spec := func(cmd *cobra.Command) func(args []string) client.DaemonEnvironmentSpec {
		var task, cluster string
		var attrs []string
		var minHealthy, timeout int
		cmd.Flags().StringVar(&task, "task", "", "the task definition's name (one environment per daemon and instance group)")
		cmd.Flags().StringVar(&cluster, "cluster", "", "the cluster of the instance group")
		cmd.Flags().StringArrayVar(&attrs, "attr", nil, "an attribute the instances must carry, NAME or NAME=VALUE (repeatable)")
		cmd.Flags().IntVar(&minHealthy, "min-healthy", -1, "min_healthy_percent, 0–100 (default 50, or the previous version's)")
		cmd.Flags().IntVar(&timeout, "timeout", 0, "a deployment's deadline in seconds (default 1800, or the previous version's)")
		return func(command []string) client.DaemonEnvironmentSpec {
			var s client.DaemonEnvironmentSpec
			s.TaskDefinition.Name, s.TaskDefinition.Command = task, command
			s.InstanceGroup.Cluster, s.InstanceGroup.Attributes = cluster, attrs
			if cmd.Flags().Changed("min-healthy") {
				s.DeploymentConfiguration.MinHealthyPercent = &minHealthy
			}
			if timeout != 0 {
				s.DeploymentConfiguration.TimeoutSeconds = &timeout
			}
			return s
		}
	}
	printVersion := func(v *client.DaemonVersionCreated) {
		c.printf("%s version %d: %s\n", v.Name, v.Version.Number, v.EnvironmentVersion)
	}
	// No command on an ECS cluster: --task names the ECS task definition,
	// which holds it (the server says which clusters need one).
	create := &cobra.Command{Use: "create NAME --task T --cluster C [-- COMMAND [ARGS…]]", Short: "Create a daemon environment (inactive until deployed)",
		Args: cobra.MinimumNArgs(1)}
	createSpec := spec(create)
	create.RunE = func(cmd *cobra.Command, args []string) error {
		api, err := conn.tokenClient()
		if err != nil {
			return err
		}
		s := createSpec(args[1:])
		s.Name = args[0]
		v, err := api.CreateDaemonEnvironment(cmd.Context(), s)
		if err != nil {
			return err
		}
		printVersion(v)
		return nil
	}
	update := &cobra.Command{Use: "update NAME --task T -- COMMAND [ARGS…]", Short: "Store a new version of a daemon environment (deploys nothing)",
		Args: cobra.MinimumNArgs(2)}
	updateSpec := spec(update)
	update.RunE = func(cmd *cobra.Command, args []string) error {
		api, err := conn.tokenClient()
		if err != nil {
			return err
		}
		v, err := api.UpdateDaemonEnvironment(cmd.Context(), args[0], updateSpec(args[1:]))
		if err != nil {
			return err
		}
		v.Name = args[0]
		printVersion(v)
		return nil
	}

	diff := &cobra.Command{Use: "diff NAME VERSION_ID", Short: "Show what deploying a version would change now", Args: cobra.ExactArgs(2)}
	diffOut := outputFlag(diff)
	diff.RunE = func(cmd *cobra.Command, args []string) error {
		if err := checkOutput(diffOut); err != nil {
			return err
		}
		api, err := conn.tokenClient()
		if err != nil {
			return err
		}
		d, err := api.DaemonDiff(cmd.Context(), args[0], args[1])
		if err != nil {
			return err
		}
		if *diffOut == "json" {
			return c.printJSON(d)
		}
		c.printf("%d matching instances\n", d.Instances)
		for _, id := range d.Start {
			c.printf("+ start    %s\n", id)
		}
		for _, r := range d.Replace {
			c.printf("~ replace  %s (%s, task %s)\n", r.InstanceID, r.From, r.TaskID)
		}
		for _, s := range d.Stop {
			c.printf("- stop     %s (task %s: %s)\n", s.InstanceID, s.TaskID, s.Reason)
		}
		c.printf("= unchanged %d; first batch replaces %d\n", len(d.Unchanged), d.FirstBatch)
		return nil
	}

	printDeployment := func(d *client.DaemonDeployment) {
		c.printf("deployment %s %s (%s)\n", d.ID, d.State, d.Type)
	}
	deploy := &cobra.Command{Use: "deploy NAME VERSION_ID", Short: "Start a deployment of a version", Args: cobra.ExactArgs(2)}
	deploy.RunE = func(cmd *cobra.Command, args []string) error {
		api, err := conn.tokenClient()
		if err != nil {
			return err
		}
		d, err := api.StartDaemonDeployment(cmd.Context(), args[0], args[1])
		if err != nil {
			return err
		}
		printDeployment(d)
		return nil
	}
	rollback := &cobra.Command{Use: "rollback NAME [VERSION_ID]", Short: "Deploy the previous (or the named) version", Args: cobra.RangeArgs(1, 2)}
	rollback.RunE = func(cmd *cobra.Command, args []string) error {
		api, err := conn.tokenClient()
		if err != nil {
			return err
		}
		d, err := api.RollbackDaemonDeployment(cmd.Context(), args[0], strings.Join(args[1:], ""))
		if err != nil {
			return err
		}
		printDeployment(d)
		return nil
	}
	stop := &cobra.Command{Use: "stop NAME", Short: "Halt the deployment in progress (tasks stay; the environment goes inactive)", Args: cobra.ExactArgs(1)}
	stop.RunE = func(cmd *cobra.Command, args []string) error {
		api, err := conn.tokenClient()
		if err != nil {
			return err
		}
		d, err := api.StopDaemonDeployment(cmd.Context(), args[0])
		if err != nil {
			return err
		}
		printDeployment(d)
		return nil
	}
	deployments := &cobra.Command{Use: "deployments NAME", Short: "List an environment's deployments, latest first", Args: cobra.ExactArgs(1)}
	depOut := outputFlag(deployments)
	deployments.RunE = func(cmd *cobra.Command, args []string) error {
		if err := checkOutput(depOut); err != nil {
			return err
		}
		api, err := conn.tokenClient()
		if err != nil {
			return err
		}
		ds, err := api.DaemonDeployments(cmd.Context(), args[0])
		if err != nil {
			return err
		}
		if *depOut == "json" {
			return c.printJSON(ds)
		}
		w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tTYPE\tSTATE\tBATCHES\tCREATED\tREASON")
		for _, d := range ds {
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\n", d.ID, d.Type, d.State, d.Batches, d.CreatedAt.Format("2006-01-02 15:04:05"), d.Reason)
		}
		return w.Flush()
	}
	del := &cobra.Command{Use: "delete NAME", Short: "Delete an environment (its tasks stop)", Args: cobra.ExactArgs(1)}
	del.RunE = func(cmd *cobra.Command, args []string) error {
		api, err := conn.tokenClient()
		if err != nil {
			return err
		}
		if err := api.DeleteDaemonEnvironment(cmd.Context(), args[0]); err != nil {
			return err
		}
		c.printf("deleted %s\n", args[0])
		return nil
	}
	cmd.AddCommand(list, show, create, update, diff, deploy, rollback, stop, deployments, del)
	return cmd
}
