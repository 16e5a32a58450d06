-- Leases of inference budgets (SPEC S14), held by the gateway replicas
-- that share this database: a replica admits model requests against its
-- own lease of each budget, and takes more under the organisation's lock
-- when it runs short. A gateway alone with its SQLite file keeps its
-- reservations in memory and leaves this table empty; it is here so both
-- dialects have one schema. project_id '' is the organisation's budget;
-- month the first instant of the month (UTC, unix nanoseconds) it counts
-- in.
-- amount is what the lease holds: granted, less what recorded requests
-- released (in the transaction that records them). A lease whose
-- expires_at has passed (its replica died) counts no more and is removed
-- by another replica's next renewal.

-- +goose Up
CREATE TABLE inference_leases (
    org_id     TEXT    NOT NULL,
    project_id TEXT    NOT NULL,
    month      INTEGER NOT NULL,
    replica    TEXT    NOT NULL,
    amount     REAL    NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (org_id, project_id, month, replica)
);

-- +goose Down
DROP TABLE inference_leases;
