package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gantryhq/gantry/internal/tgraph"
)

func (c *cli) infraCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "infra",
		Short: "Infrastructure delivery tools that need no server",
	}
	graph := &cobra.Command{
		Use:   "graph DIR",
		Short: "Print a Terragrunt repository's units in dependency order",
		Long: `gantry infra graph reads the terragrunt.hcl files under DIR the way Gantry does
after a merge (dependency blocks, dependencies.paths, includes, read_terragrunt_config,
local module sources) and prints every unit after the units it depends on. An
expression Gantry cannot evaluate, a cycle or a missing dependency is an error
naming the file and line, so you can check a repository before pointing Gantry at it.

  -o text   one unit per line: path, then what it runs after
  -o dot    Graphviz (gantry infra graph live -o dot | dot -Tsvg > graph.svg)
  -o json   the units with their dependencies and the files each one reads`,
		Args: cobra.ExactArgs(1),
	}
	output := graph.Flags().StringP("output", "o", "text", "text, dot or json")
	graph.RunE = func(_ *cobra.Command, args []string) error {
		g, err := tgraph.Scan(args[0])
		if err != nil {
			return err
		}
		switch *output {
		case "text":
			return tgraph.WriteText(c.stdout, g)
		case "dot":
			return tgraph.WriteDOT(c.stdout, g)
		case "json":
			enc := json.NewEncoder(c.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(g.Units)
		}
		return fmt.Errorf("--output must be text, dot or json, not %q", *output)
	}
	cmd.AddCommand(graph)
	return cmd
}
