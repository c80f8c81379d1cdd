DROP TABLE executions, votes, approvals, merge_locks, runs, pr_plans, pull_requests, webhook_deliveries, accounts, repositories;
