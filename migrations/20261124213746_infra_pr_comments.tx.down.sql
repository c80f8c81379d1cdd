DROP TABLE pr_plan_comments;
ALTER TABLE repositories DROP COLUMN plan_comments;
