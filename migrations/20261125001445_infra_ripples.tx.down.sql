DROP TABLE execution_ripples;
DROP TABLE execution_output_changes;
