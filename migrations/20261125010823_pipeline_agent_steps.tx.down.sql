DROP TABLE pipeline_agent_steps;
