package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gantryhq/gantry/client"
)

func (c *cli) pipelinesCommand() *cobra.Command {
	conn := &serverConn{cli: c, tokenHint: "an API token with the write scope to register revisions and artifacts, read to list " +
		"(create one on Gantry's /tokens page, or: gantry admin token create --user EMAIL --name NAME --scopes read,write)"}
	cmd := &cobra.Command{
		Use:   "pipelines",
		Short: "Register revisions and artifacts with release pipelines; see where revisions stand",
		Long: `gantry pipelines is what CI calls when it has built something: it registers the
revision with a pipeline of gantry.yaml, and each build artifact, and Gantry moves
the revision through the pipeline's stages. These commands need only the server
and a token:

  GANTRY_SERVER  Gantry's URL (or --server; default GANTRY_BASE_URL)
  GANTRY_TOKEN   API token with the write scope to register, read to list
                 (or --token)

  gantry pipelines list                                 the pipelines
  gantry pipelines show PIPELINE                        its stages and where each revision stands
  gantry pipelines show PIPELINE REV                    a revision's steps and why each waits
  gantry pipelines revision PIPELINE REV                register a revision (again: no change)
  gantry pipelines artifact PIPELINE REV --arch x86 --location URL`,
	}
	cmd.AddCommand(c.pipelinesList(conn), c.pipelinesShow(conn), c.pipelinesRevision(conn), c.pipelinesArtifact(conn))
	return cmd
}

func (c *cli) pipelinesList(conn *serverConn) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the pipelines with their revisions in flight",
		Long: `gantry pipelines list prints each pipeline of gantry.yaml: its stages and hosts,
how many revisions are in flight (and how many a failed step blocks), and the
latest revision that went through it. -o json prints them as the API returns them.`,
		Args: cobra.NoArgs,
	}
	return c.infraServerCommand(conn, cmd, nil, func(ctx context.Context, cl *client.Client, output string, _ []string) error {
		list, err := cl.Pipelines(ctx)
		if err != nil {
			return err
		}
		if output == "json" {
			return c.printJSON(list)
		}
		if len(list) == 0 {
			c.printf("No pipelines: define them under pipelines: in gantry.yaml (docs/areas/pipelines.md).\n")
			return nil
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "PIPELINE\tSTAGES\tHOSTS\tIN FLIGHT\tBLOCKED\tLATEST THROUGH")
		for _, p := range list {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", p.Name, p.Stages, p.Hosts, p.InFlight, p.Blocked, orDash(p.LatestFinished))
		}
		return tw.Flush()
	})
}

func (c *cli) pipelinesShow(conn *serverConn) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "show PIPELINE [REV]",
		Short: "Show a pipeline's stages and revisions, or one revision's steps",
		Long: `gantry pipelines show PIPELINE prints each stage with the revisions working in it
and what each is doing there (running, waiting for an artifact or votes, waiting
for a batch, failed…). With REV it prints that revision's steps that are not done,
each with why: the step running, the one that failed and why, those waiting for
parallel work or for a batch another revision holds.`,
		Example: `  gantry pipelines show web
  gantry pipelines show web 1.4.2
  gantry pipelines show web 1.4.2 -o json | jq '.blocked'`,
		Args: cobra.RangeArgs(1, 2),
	}
	return c.infraServerCommand(conn, cmd, nil, func(ctx context.Context, cl *client.Client, output string, args []string) error {
		if len(args) == 2 {
			return c.showPipelineRevision(ctx, cl, output, args[0], args[1])
		}
		p, err := cl.Pipeline(ctx, args[0])
		if err != nil {
			return err
		}
		if output == "json" {
			return c.printJSON(p)
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "STAGE\tAFTER\tKIND\tREVISIONS HERE")
		for _, st := range p.Stages {
			var here []string
			for _, r := range st.Revisions {
				here = append(here, r.Revision+" ("+r.State+")")
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", st.Name, orDash(strings.Join(st.After, ", ")), st.Kind, orDash(strings.Join(here, ", ")))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if len(p.InFlight) == 0 {
			c.printf("\nNo revision in flight.\n")
		}
		return nil
	})
}

func (c *cli) showPipelineRevision(ctx context.Context, cl *client.Client, output, pipeline, rev string) error {
	d, err := cl.PipelineRevision(ctx, pipeline, rev)
	if err != nil {
		return err
	}
	if output == "json" {
		return c.printJSON(d)
	}
	c.printf("%s %s: %s\n", d.Pipeline, d.Revision, d.Status)
	if d.Blocked != nil {
		c.printf("blocked: %s on %s failed: %s\n", d.Blocked.Event, d.Blocked.Target, d.Blocked.Reason)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tTARGET\tSTATE\tWHY")
	for _, s := range d.Steps {
		if s.State == "done" || s.State == "pending" {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Event, s.Target, s.State, oneLine(s.Why, 100))
	}
	return tw.Flush()
}

func (c *cli) pipelinesRevision(conn *serverConn) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "revision PIPELINE REV",
		Short: "Register a revision with a pipeline",
		Long: `gantry pipelines revision registers revision REV (a version, a git SHA, a build
number) with PIPELINE: it starts through the pipeline at once and waits at a build
stage for its artifacts. Registering a revision again changes nothing, so CI may
retry it safely.`,
		Example: `  gantry pipelines revision web 1.4.2
  gantry pipelines revision web "$GITHUB_SHA"`,
		Args: cobra.ExactArgs(2),
	}
	return c.infraServerCommand(conn, cmd, nil, func(ctx context.Context, cl *client.Client, output string, args []string) error {
		r, created, err := cl.RegisterRevision(ctx, args[0], args[1])
		if err != nil {
			return err
		}
		if output == "json" {
			return c.printJSON(r)
		}
		if created {
			c.printf("Registered %s %s; it is on its way through the pipeline.\n", r.Pipeline, r.Revision)
		} else {
			c.printf("%s %s was registered already (%s); nothing changed.\n", r.Pipeline, r.Revision, r.Status)
		}
		return nil
	})
}

func (c *cli) pipelinesArtifact(conn *serverConn) *cobra.Command {
	var arch, location string
	cmd := &cobra.Command{
		Use:   "artifact PIPELINE REV --arch ARCH --location LOCATION",
		Short: "Register a revision's build artifact for one architecture",
		Long: `gantry pipelines artifact registers where revision REV's artifact for architecture
ARCH is (a URL, an image, a path): a build stage waiting for it finishes when it
has every architecture it needs, and host steps get the location as {artifact}.
The architecture must be one the pipeline's build stages wait for.`,
		Example: `  gantry pipelines artifact web 1.4.2 --arch x86 --location s3://builds/web-1.4.2-x86.tar.gz`,
		Args:    cobra.ExactArgs(2),
	}
	cmd.Flags().StringVar(&arch, "arch", "", "the architecture, as the pipeline's build stage names it (required)")
	cmd.Flags().StringVar(&location, "location", "", "where the artifact is (required)")
	check := func([]string) error {
		var missing []string
		if arch == "" {
			missing = append(missing, "--arch")
		}
		if location == "" {
			missing = append(missing, "--location")
		}
		if len(missing) > 0 {
			return errors.New(strings.Join(missing, " and ") + " required")
		}
		return nil
	}
	return c.infraServerCommand(conn, cmd, check, func(ctx context.Context, cl *client.Client, output string, args []string) error {
		a, created, err := cl.RegisterArtifact(ctx, args[0], args[1], arch, location)
		if err != nil {
			return err
		}
		if output == "json" {
			return c.printJSON(a)
		}
		if created {
			c.printf("Registered the %s artifact of %s %s at %s.\n", a.Arch, args[0], args[1], a.Location)
		} else {
			c.printf("The %s artifact of %s %s was registered already at %s; nothing changed.\n", a.Arch, args[0], args[1], a.Location)
		}
		return nil
	})
}
