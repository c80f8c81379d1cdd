-- Where a repository's commands run when gantry.yaml says runs_on: ecs:
-- its ecs block (cluster, task definition, subnets, plan store, …) as
-- JSON; NULL runs them on the worker's machine.
ALTER TABLE repositories ADD COLUMN ecs jsonb;
