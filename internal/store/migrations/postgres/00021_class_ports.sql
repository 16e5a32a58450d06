-- The ports a class's engineer sandboxes serve (a devcontainer's
-- forwardPorts, as berth image build prints its class): a JSON array of
-- numbers, NULL for none. berth sandbox show lists them to forward.

-- +goose Up
ALTER TABLE classes ADD COLUMN ports TEXT;

-- +goose Down
ALTER TABLE classes DROP COLUMN ports;
