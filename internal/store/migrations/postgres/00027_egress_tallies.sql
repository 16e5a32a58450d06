-- Egress (issue 22): what each sandbox's connections through the egress
-- proxy came to, per host, port and decision (allowed 1 or refused 0):
-- `berth sandbox egress` and the hosts a run was refused. Replicas add to
-- the same row; ended sandboxes' rows go with them.

-- +goose Up
CREATE TABLE egress_tallies (
    sandbox_id  TEXT    NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
    host        TEXT    NOT NULL,
    port        INTEGER NOT NULL,
    allowed     INTEGER NOT NULL,
    connections BIGINT  NOT NULL,
    bytes_up    BIGINT  NOT NULL,
    bytes_down  BIGINT  NOT NULL,
    first_at    BIGINT  NOT NULL,
    last_at     BIGINT  NOT NULL,
    why         TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (sandbox_id, host, port, allowed)
);

-- +goose Down
DROP TABLE egress_tallies;
