-- A sandbox's model calls are read by its id: sandbox show joins what the
-- gateway metered to the run, the usage report sums them by sandbox, and
-- retention deletes them with their sandbox.

-- +goose Up
CREATE INDEX inference_usage_sandbox ON inference_usage (sandbox_id);

-- +goose Down
DROP INDEX inference_usage_sandbox;
