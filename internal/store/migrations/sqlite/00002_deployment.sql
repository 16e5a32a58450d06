-- The deployment's identity: one row, written once. Drivers label what they
-- create with it, so two gateways sharing a host never reconcile each
-- other's machines away.

-- +goose Up
CREATE TABLE deployment (
    id TEXT NOT NULL PRIMARY KEY
);

-- +goose Down
DROP TABLE deployment;
