package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gantryhq/gantry/client"
	"github.com/gantryhq/gantry/internal/tgraph"
)

func (c *cli) infraCommand() *cobra.Command {
	conn := &serverConn{cli: c, tokenHint: "an API token with the read scope, and the vote scope to vote " +
		"(create one on Gantry's /tokens page, or: gantry admin token create --user EMAIL --name NAME --scopes read,vote)"}
	cmd := &cobra.Command{
		Use:   "infra",
		Short: "Follow and vote on infrastructure deployments; check a repository's dependency order",
		Long: `gantry infra follows the deployments of merged pull requests and votes on their
plans, from a terminal or a CI job. These commands need only the server and a token:

  GANTRY_SERVER  Gantry's URL (or --server; default GANTRY_BASE_URL)
  GANTRY_TOKEN   API token with the read scope, and the vote scope to vote
                 (or --token); votes count as the token's user, who must be
                 one of the execution's voters

  gantry infra runs                    recent runs (one per merged pull request)
  gantry infra run ID                  a run and its executions in dependency order
  gantry infra execution EXECUTION_ID  one execution: its votes and plan output
  gantry infra approvals               what waits for your vote
  gantry infra vote EXECUTION_ID approve|reject

gantry infra graph needs no server: it checks a repository's dependency order locally.`,
	}
	graph := &cobra.Command{
		Use:   "graph DIR",
		Short: "Print a Terragrunt repository's units in dependency order",
		Long: `gantry infra graph reads a repository's terragrunt.hcl files the way Gantry does
after a merge (dependency blocks, dependencies.paths, includes, read_terragrunt_config,
local module sources) and prints the units under DIR, each after the units it
depends on, so you can check a repository before pointing Gantry at it.

When DIR is in a git repository (a .git directory or file in DIR or above it),
the whole repository is read from its root, as Gantry reads it, so that modules,
root.hcl and dependencies outside DIR resolve; otherwise DIR is the root. Unit
paths are relative to that root, as Gantry shows them (live/vpc); a dependency
outside DIR is not listed, only named where a unit under DIR runs after it.

A unit Gantry cannot read (an expression it cannot evaluate, a dependency
directory that does not exist) is left out of the listing, and gantry exits
non-zero after it with one error per problem of such a unit anywhere in the
repository, starting with the file and line, relative to the current directory
(absolute for a file outside it); paths within the message are relative to the
repository root. Gantry fails those units (and what depends on them) in a run,
not the whole repository. A dependency cycle lists nothing. A DIR without any
unit is an error too, so a wrong path does not pass unnoticed.

  -o text   one unit per line: path, then what it runs after
  -o dot    Graphviz (gantry infra graph live -o dot | dot -Tsvg > graph.svg)
  -o json   the units with their dependencies and the files each one reads`,
		Args: cobra.ExactArgs(1),
	}
	output := outputFlag(graph, "text", "dot", "json")
	graph.RunE = func(_ *cobra.Command, args []string) error {
		if err := checkOutput(output, "text", "dot", "json"); err != nil {
			return err
		}
		info, err := os.Stat(args[0])
		if err != nil {
			return err
		}
		if !info.IsDir() {
			return fmt.Errorf("%s is not a directory", args[0])
		}
		dir, err := filepath.Abs(args[0])
		if err != nil {
			return err
		}
		// Through a symlink, the repository is the one the files are in,
		// and the walk (which does not follow links) starts inside it.
		if dir, err = filepath.EvalSymlinks(dir); err != nil {
			return err
		}
		root := repositoryRoot(dir)
		g, scanErr := tgraph.Scan(root)
		if scanErr != nil {
			cwd, _ := os.Getwd() // without it, files are named by absolute paths
			scanErr = filesFrom(scanErr, root, cwd)
		}
		if g == nil {
			return scanErr
		}
		under, err := filepath.Rel(root, dir)
		if err != nil {
			return err
		}
		under = filepath.ToSlash(under)
		units := g.UnitsUnder(under)
		// A mistyped DIR would otherwise pass as a repository without units.
		if len(units) == 0 {
			return fmt.Errorf("no Terragrunt units (terragrunt.hcl) under %s", args[0])
		}
		switch *output {
		case "text":
			err = tgraph.WriteText(c.stdout, g, under)
		case "dot":
			err = tgraph.WriteDOT(c.stdout, g, under)
		default:
			err = c.printJSON(jsonUnits(units))
		}
		if err != nil || scanErr == nil {
			return err
		}
		var broken []string
		for _, u := range g.Broken() {
			broken = append(broken, u.Path)
		}
		return fmt.Errorf("%s left out, as Gantry cannot read %s:\n%w",
			plural(len(broken), "unit", "units"), strings.Join(broken, ", "), scanErr)
	}
	cmd.AddCommand(graph, c.infraRuns(conn), c.infraRun(conn), c.infraExecution(conn), c.infraApprovals(conn), c.infraVote(conn))
	return cmd
}

// repositoryRoot is the top of the git repository holding dir: the nearest
// directory at or above it with a .git directory, or a .git file as in
// worktrees and submodules. Outside any repository it is dir itself.
func repositoryRoot(dir string) string {
	for d := dir; ; {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			return dir
		}
		d = parent
	}
}

// filesFrom rewrites the files that scan errors start with, relative to the
// repository root, as paths from cwd, so that they open as printed from
// wherever gantry ran.
func filesFrom(err error, root, cwd string) error {
	switch e := err.(type) {
	case *tgraph.Error:
		if e.File == "" || path.IsAbs(e.File) {
			return e
		}
		moved := *e
		moved.File = pathFrom(cwd, filepath.Join(root, filepath.FromSlash(e.File)))
		return &moved
	case interface{ Unwrap() []error }:
		errs := e.Unwrap()
		moved := make([]error, len(errs))
		for i, err := range errs {
			moved[i] = filesFrom(err, root, cwd)
		}
		return errors.Join(moved...)
	}
	return err
}

// pathFrom is the absolute path file as seen from cwd: relative below cwd,
// absolute elsewhere, which reads better than a climb of ../ and opens the
// same.
func pathFrom(cwd, file string) string {
	if cwd == "" {
		return file
	}
	if rel, err := filepath.Rel(cwd, file); err == nil && filepath.IsLocal(rel) {
		return rel
	}
	return file
}

// jsonUnit is a unit as -o json prints it.
type jsonUnit struct {
	Path         string   `json:"path"`
	Dependencies []string `json:"dependencies"`
	Reads        []string `json:"reads"`
}

// jsonUnits copies units with empty lists rather than nil ones: scripts
// iterate them with jq's .[], which fails on null.
func jsonUnits(units []*tgraph.Unit) []jsonUnit {
	out := make([]jsonUnit, 0, len(units))
	for _, u := range units {
		if len(u.Errors) > 0 {
			continue // named in the error instead
		}
		out = append(out, jsonUnit{Path: u.Path, Dependencies: orEmpty(u.Dependencies), Reads: orEmpty(u.Reads)})
	}
	return out
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// infraServerCommand finishes a command that talks to the server: the
// connection flags, -o text|json, and run getting a client once the
// arguments passed the checks done before any request.
func (c *cli) infraServerCommand(conn *serverConn, cmd *cobra.Command,
	check func(args []string) error, run func(ctx context.Context, cl *client.Client, output string, args []string) error) *cobra.Command {
	conn.addFlags(cmd, false)
	output := outputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := checkOutput(output); err != nil {
			return err
		}
		if check != nil {
			if err := check(args); err != nil {
				return err
			}
		}
		cl, err := conn.tokenClient()
		if err != nil {
			return err
		}
		return run(cmd.Context(), cl, *output, args)
	}
	return cmd
}

func (c *cli) printJSON(v any) error {
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func (c *cli) infraRuns(conn *serverConn) *cobra.Command {
	var opts client.RunsOptions
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List deployment runs, newest first",
		Long: `gantry infra runs lists deployment runs (one per pull request merged into a
repository's trunk), newest first: id, repository, pull request, status, merge
commit, when it started (a queued run waits for the repository's merge lock) and
the pull request's title. -o json prints the runs as the API returns them.

Statuses: queued, scanning, running, succeeded, failed.`,
		Example: `  gantry infra runs
  gantry infra runs --repository live --status running
  gantry infra runs --pr 42 -o json | jq '.[0].id'`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringVar(&opts.Repository, "repository", "", "only this repository's runs (its name in gantry.yaml)")
	cmd.Flags().StringVar(&opts.Status, "status", "", "only runs with this status: queued, scanning, running, succeeded or failed")
	cmd.Flags().IntVar(&opts.PR, "pr", 0, "only the runs of this pull request number")
	cmd.Flags().IntVar(&opts.Limit, "limit", 50, "at most this many runs")
	check := func([]string) error {
		if opts.Limit < 1 {
			return fmt.Errorf("--limit must be at least 1, not %d", opts.Limit)
		}
		return nil
	}
	return c.infraServerCommand(conn, cmd, check, func(ctx context.Context, cl *client.Client, output string, _ []string) error {
		runs, err := cl.Runs(ctx, opts)
		if err != nil {
			return err
		}
		if output == "json" {
			return c.printJSON(runs)
		}
		if len(runs) == 0 {
			c.printf("No runs.\n")
			return nil
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tREPOSITORY\tPR\tSTATUS\tMERGE\tSTARTED\tTITLE")
		for _, r := range runs {
			fmt.Fprintf(tw, "%d\t%s\t#%d\t%s\t%s\t%s\t%s\n", r.ID, r.Repository, r.PRNumber, r.Status, short(r.MergeCommit),
				timeOrDash(r.StartedAt), oneLine(r.PRTitle, 60))
		}
		return tw.Flush()
	})
}

func (c *cli) infraRun(conn *serverConn) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "run ID",
		Short: "Show a run and its executions in dependency order",
		Long: `gantry infra run shows a deployment run and its executions (one per Terragrunt
unit), each after the executions it waits for: its execution id, unit, account,
status (with the step of a running one: planning, voting or applying) and what
it runs after. A failed run's rollbacks (which destroy the resources of new
providers its applies introduced, in reverse order) follow in a table of their
own. Errors of failed and aborted executions follow the tables.
-o json prints the run as the API returns it, executions in the same order.`,
		Example: `  gantry infra run 12
  gantry infra run 12 -o json | jq -r '.executions[] | select(.step == "voting") | .execution_id'`,
		Args: cobra.ExactArgs(1),
	}
	var id int64
	check := func(args []string) error {
		n, err := strconv.ParseInt(args[0], 10, 64)
		if err != nil || n <= 0 {
			return fmt.Errorf("%q is not a run id: give the number gantry infra runs shows in its ID column", args[0])
		}
		id = n
		return nil
	}
	return c.infraServerCommand(conn, cmd, check, func(ctx context.Context, cl *client.Client, output string, _ []string) error {
		d, err := cl.Run(ctx, id)
		if err != nil {
			return err
		}
		if output == "json" {
			return c.printJSON(d)
		}
		c.printRun(d)
		return nil
	})
}

func (c *cli) printRun(d *client.RunDetail) {
	r := d.Run
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "run\t%d: %s #%d %s\n", r.ID, r.Repository, r.PRNumber, oneLine(r.PRTitle, 100))
	status := r.Status
	if d.HoldsMergeLock {
		status += " (holds the merge lock)"
	}
	fmt.Fprintf(tw, "status\t%s\n", status)
	fmt.Fprintf(tw, "merge\t%s (%s into %s, scan %s)\n", short(r.MergeCommit), r.HeadRef, r.BaseRef, r.Scan)
	fmt.Fprintf(tw, "created\t%s\n", r.CreatedAt.UTC().Format(time.RFC3339))
	fmt.Fprintf(tw, "started\t%s\n", timeOrDash(r.StartedAt))
	fmt.Fprintf(tw, "finished\t%s\n", timeOrDash(r.FinishedAt))
	if len(r.DeletedUnits) > 0 {
		fmt.Fprintf(tw, "deleted\t%s\n", strings.Join(r.DeletedUnits, ", "))
	}
	if r.Error != "" {
		fmt.Fprintf(tw, "error\t%s\n", r.Error)
	}
	_ = tw.Flush()
	c.printf("\n")
	if len(d.Executions) == 0 {
		c.printf("No executions.\n")
		return
	}
	var forward, rollbacks []client.Execution
	for _, x := range d.Executions {
		if x.IsRollback {
			rollbacks = append(rollbacks, x)
		} else {
			forward = append(forward, x)
		}
	}
	accounts := map[string]bool{}
	for _, x := range forward {
		accounts[x.AccountName] = true
	}
	tw = tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "EXECUTION\tUNIT\tACCOUNT\tSTATUS\tAFTER")
	for _, x := range forward {
		after := append([]string(nil), x.CfgDeps...)
		for _, a := range x.AccountDeps {
			if accounts[a] {
				after = append(after, "account "+a)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", x.ExecutionID, x.CfgPath, x.AccountName, x.State(), orDash(strings.Join(after, ", ")))
	}
	_ = tw.Flush()
	if len(rollbacks) > 0 {
		c.printf("\nrollbacks (destroy the resources of new providers; a unit's after the units that depended on it):\n")
		tw = tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ROLLBACK\tUNIT\tACCOUNT\tSTATUS\tAFTER")
		for _, r := range rollbacks {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.ExecutionID, r.CfgPath, r.AccountName, r.State(), orDash(strings.Join(rollbackAfter(r, rollbacks), ", ")))
		}
		_ = tw.Flush()
	}
	sep := "\n"
	for _, x := range d.Executions {
		if x.Error != "" {
			c.printf("%s%s: %s\n", sep, x.CfgPath, x.Error)
			sep = ""
		}
	}
}

// rollbackAfter is what rollback r waits for among a run's rollbacks: the
// dependencies reversed, as the server orders them (the rollbacks of the
// units, and of the accounts, that depended on r's).
func rollbackAfter(r client.Execution, rollbacks []client.Execution) []string {
	var after []string
	for _, o := range rollbacks {
		switch {
		case o.ExecutionID == r.ExecutionID:
		case slices.Contains(o.CfgDeps, r.CfgPath):
			after = append(after, o.CfgPath)
		case o.AccountName != r.AccountName && slices.Contains(o.AccountDeps, r.AccountName):
			after = append(after, o.CfgPath+" (account "+o.AccountName+")")
		}
	}
	return after
}

func (c *cli) infraExecution(conn *serverConn) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "execution EXECUTION_ID",
		Short: "Show one execution: its state, votes, and plan and apply output",
		Long: `gantry infra execution shows one execution of a run (what gantry infra vote
votes on): its unit and account, status, voters and thresholds, the votes cast,
and the plan and apply output so far. Read the plan here before voting. A
rollback shows what it destroys and, once failed, what is left in the state;
an execution whose apply introduced providers lists their resources.
-o json prints the execution as the API returns it.`,
		Example: `  gantry infra execution run-42-c8c5-prod-vpc-001
  gantry infra execution run-42-c8c5-prod-vpc-001 -o json | jq -r .plan_output`,
		Args: cobra.ExactArgs(1),
	}
	return c.infraServerCommand(conn, cmd, nil, func(ctx context.Context, cl *client.Client, output string, args []string) error {
		x, err := cl.Execution(ctx, args[0])
		if err != nil {
			return err
		}
		if output == "json" {
			return c.printJSON(x)
		}
		c.printExecution(x)
		return nil
	})
}

func (c *cli) printExecution(x *client.Execution) {
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "execution\t%s (run %d)\n", x.ExecutionID, x.RunID)
	fmt.Fprintf(tw, "unit\t%s\n", x.CfgPath)
	account := x.AccountName
	if len(x.AccountDeps) > 0 {
		account += " (after " + strings.Join(x.AccountDeps, ", ") + ")"
	}
	fmt.Fprintf(tw, "account\t%s\n", account)
	fmt.Fprintf(tw, "after\t%s\n", orDash(strings.Join(x.CfgDeps, ", ")))
	fmt.Fprintf(tw, "status\t%s\n", x.State())
	fmt.Fprintf(tw, "voters\t%s (applied at %s, failed at %s)\n", strings.Join(x.Voters, ", "),
		plural(x.MinApprovalCount, "approval", "approvals"), plural(x.MinRejectionCount, "rejection", "rejections"))
	if x.ApprovalState != "" {
		fmt.Fprintf(tw, "approval\t%s: approved by %s; rejected by %s\n", x.ApprovalState, orDash(strings.Join(x.ApprovalVoters, ", ")),
			orDash(strings.Join(x.RejectionVoters, ", ")))
	}
	if x.Error != "" {
		fmt.Fprintf(tw, "error\t%s\n", x.Error)
	}
	if len(x.NewResources) > 0 {
		fmt.Fprintf(tw, "new providers\t%s: a rollback destroys %s\n", strings.Join(x.NewProviders, ", "), strings.Join(x.NewResources, ", "))
	}
	if rb := x.Rollback; rb != nil {
		why := "its run failed"
		if rb.Reason == client.RollbackUnitDeleted {
			why = "a later merge deleted the unit"
		}
		fmt.Fprintf(tw, "rollback of\t%s (%s; from commit %s)\n", rb.RollbackOf, why, short(rb.Commit))
		fmt.Fprintf(tw, "destroys\t%s\n", strings.Join(rb.Addresses, ", "))
		if x.Status == client.ExecFailed {
			fmt.Fprintf(tw, "left\t%s\n", rollbackLeft(rb))
		}
		switch {
		case rb.ResolvedAt != nil:
			fmt.Fprintf(tw, "resolved\tby %s at %s: %s\n", rb.ResolvedBy, rb.ResolvedAt.UTC().Format(time.RFC3339), orDash(rb.ResolvedReason))
		case rb.Held:
			fmt.Fprintf(tw, "held\twaits for an operator: retry it or mark it resolved on its page, or POST /api/v1/infra/executions/%s/rollback-retry|rollback-resolved\n", x.ExecutionID)
		}
	}
	_ = tw.Flush()
	if len(x.Votes) > 0 {
		c.printf("\nvotes (a voter's latest counts):\n")
		tw = tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		for _, v := range x.Votes {
			fmt.Fprintf(tw, "  %s\t%s\t%s\tvia %s\t%s\n", v.CreatedAt.UTC().Format(time.RFC3339), v.Voter, v.Decision, v.Via, oneLine(v.Comment, 100))
		}
		_ = tw.Flush()
	}
	for _, out := range []struct{ name, text string }{{"plan", x.PlanOutput}, {"apply", x.ApplyOutput}} {
		if out.text != "" {
			c.printf("\n--- %s output ---\n%s", out.name, out.text)
			if !strings.HasSuffix(out.text, "\n") {
				c.printf("\n")
			}
		}
	}
}

// rollbackLeft says what a failed rollback left in the state.
func rollbackLeft(rb *client.Rollback) string {
	switch {
	case rb.Remaining == nil && rb.RemainingError != "":
		return "unknown: " + rb.RemainingError
	case rb.Remaining == nil:
		return "unknown"
	case len(rb.Remaining) == 0:
		return "nothing"
	}
	return strings.Join(rb.Remaining, ", ")
}

func (c *cli) infraApprovals(conn *serverConn) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "approvals",
		Short: "List the executions waiting for your vote",
		Long: `gantry infra approvals lists the executions whose plan waits for the vote of
the token's user: their execution id, run, unit, account and how many approvals
apply the plan; a rollback's unit says "(rollback)": its plan destroys the
resources of new providers. Read a plan with gantry infra execution, then vote with
gantry infra vote. -o json prints the executions as the API returns them.`,
		Example: `  gantry infra approvals
  gantry infra approvals -o json | jq -r '.[].execution_id'`,
		Args: cobra.NoArgs,
	}
	return c.infraServerCommand(conn, cmd, nil, func(ctx context.Context, cl *client.Client, output string, _ []string) error {
		xs, err := cl.Approvals(ctx)
		if err != nil {
			return err
		}
		if output == "json" {
			return c.printJSON(xs)
		}
		if len(xs) == 0 {
			c.printf("Nothing waits for your vote.\n")
			return nil
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "EXECUTION\tRUN\tUNIT\tACCOUNT\tAPPLIES AT")
		for _, x := range xs {
			unit := x.CfgPath
			if x.IsRollback {
				unit += " (rollback)"
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", x.ExecutionID, x.RunID, unit, x.AccountName, plural(x.MinApprovalCount, "approval", "approvals"))
		}
		return tw.Flush()
	})
}

func (c *cli) infraVote(conn *serverConn) *cobra.Command {
	var comment string
	cmd := &cobra.Command{
		Use:   "vote EXECUTION_ID approve|reject",
		Short: "Approve or reject an execution's plan",
		Long: `gantry infra vote records the token's user's vote on an execution's plan and
prints where the vote stands: pending, approved (the plan the voters saw is
applied now) or rejected (the execution fails and what depends on it is
aborted), with the approvals, rejections and the voters yet to vote.

The token needs the vote scope, and its user the approver role and a place
among the execution's voters; otherwise the server refuses the vote (403) and
gantry exits non-zero with the server's message. A voter may change their vote
until the execution is decided: the latest counts.

A vote is sent again only when the server surely never got it (no connection,
or rate limited). If the answer is lost on the way back, look at the execution
(gantry infra execution) before voting again.`,
		Example: `  gantry infra vote run-42-c8c5-prod-vpc-001 approve
  gantry infra vote run-42-c8c5-prod-vpc-001 reject --comment "the subnet is too small"
  gantry infra vote "$EXECUTION_ID" approve -o json | jq -r .state`,
		Args: cobra.ExactArgs(2),
	}
	cmd.Flags().StringVar(&comment, "comment", "", "why, shown with the vote (at most 4,000 bytes)")
	var decision string
	check := func(args []string) error {
		decision = strings.ToLower(args[1])
		if decision != client.Approve && decision != client.Reject {
			return fmt.Errorf("the decision must be approve or reject, not %q (gantry infra vote EXECUTION_ID approve|reject)", args[1])
		}
		return nil
	}
	return c.infraServerCommand(conn, cmd, check, func(ctx context.Context, cl *client.Client, output string, args []string) error {
		res, err := cl.Vote(ctx, args[0], decision, comment)
		if err != nil {
			// An answer, or no connection at all, says what happened;
			// anything else may have lost the answer to a recorded vote.
			var ae *client.APIError
			var op *net.OpError
			if !errors.As(err, &ae) && !(errors.As(err, &op) && op.Op == "dial") && ctx.Err() == nil {
				return fmt.Errorf("%w; the vote may have been recorded: check with gantry infra execution %s before voting again", err, args[0])
			}
			return err
		}
		if output == "json" {
			return c.printJSON(res)
		}
		c.printVote(args[0], res)
		return nil
	})
}

func (c *cli) printVote(executionID string, res *client.VoteResult) {
	tally := plural(res.Approvals, "approval", "approvals") + ", " + plural(res.Rejections, "rejection", "rejections")
	switch res.State {
	case client.ApprovalApproved:
		c.printf("%s: approved (%s); the plan is being applied\n", executionID, tally)
	case client.ApprovalRejected:
		c.printf("%s: rejected (%s); the execution failed and what depends on it is aborted\n", executionID, tally)
	default:
		c.printf("%s: %s (%s)", executionID, res.State, tally)
		if len(res.Waiting) > 0 {
			c.printf("; waiting for %s", strings.Join(res.Waiting, ", "))
		}
		c.printf("\n")
	}
}

// short is a commit's abbreviation.
func short(sha string) string { return sha[:min(len(sha), 8)] }

func timeOrDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine is s's first line, cut to at most n characters.
func oneLine(s string, n int) string {
	s, _, cut := strings.Cut(s, "\n")
	if r := []rune(s); len(r) > n {
		s, cut = string(r[:n]), true
	}
	if cut {
		s += "…"
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
