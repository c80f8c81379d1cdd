DROP TABLE allocations;
DROP TABLE environments;
DROP TABLE pools;
DROP TABLE clients;
