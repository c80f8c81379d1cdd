-- Plan summaries on the pull request: one comment per pull request, edited
-- in place on every plan. comment_id is GitHub's id of the comment; body is
-- what was last written, so a job run again with nothing new sends nothing.
ALTER TABLE repositories ADD COLUMN plan_comments boolean NOT NULL DEFAULT true;

CREATE TABLE pr_plan_comments (
    repository text NOT NULL,
    pr_number  integer NOT NULL,
    comment_id bigint NOT NULL,
    body       text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (repository, pr_number),
    FOREIGN KEY (repository, pr_number) REFERENCES pull_requests (repository, number)
);
