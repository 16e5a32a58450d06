-- The deployment's identity: one row, written once (see ../sqlite).

-- +goose Up
CREATE TABLE deployment (
    id TEXT NOT NULL PRIMARY KEY
);

-- +goose Down
DROP TABLE deployment;
