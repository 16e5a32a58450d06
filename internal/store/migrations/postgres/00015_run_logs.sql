-- Runs' logs in the database (SPEC S13.4), for replicas that share it: any
-- replica answers for a run another one read. In chunks as written, seq 0
-- an empty marker that the log exists.

-- +goose Up
CREATE TABLE run_logs (
    sandbox_id TEXT    NOT NULL,
    seq        BIGINT  NOT NULL,
    data       BYTEA   NOT NULL,
    PRIMARY KEY (sandbox_id, seq)
);

-- +goose Down
DROP TABLE run_logs;
