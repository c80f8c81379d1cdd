ALTER TABLE repositories DROP COLUMN ecs;
