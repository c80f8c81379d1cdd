DROP TABLE execution_new_resources;
