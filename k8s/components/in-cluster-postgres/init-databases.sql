-- One PostgreSQL server, one database per service that keeps state (each has its own Alembic
-- history): POSTGRES_DB creates "market"; this creates the other two. Runs once, on first start.
CREATE DATABASE orchestration OWNER mots;
CREATE DATABASE evaluation OWNER mots;
