-- An accepted sandbox starts (issue 15): what a start a stopped gateway
-- interrupted needs to be finished is in its row, secrets excepted (a
-- fresh key is minted then). model is the model an agent's run starts
-- on, chosen at create.
--
-- A failed engineer sandbox counts towards max_sandboxes for its volume
-- (SPEC S7), and it keeps one only if it ever ran (a running segment): the
-- sandboxes that failed before they ran had their volume removed, so they
-- end now, as such a failure does from here on.

-- +goose Up
ALTER TABLE sandboxes ADD COLUMN model TEXT NOT NULL DEFAULT '';
UPDATE sandboxes SET live = 0, ended_at = COALESCE(ended_at, created_at)
    WHERE state = 'failed' AND purpose = 'engineer' AND live = 1
      AND NOT EXISTS (SELECT 1 FROM segments g WHERE g.sandbox_id = sandboxes.id);

-- +goose Down
ALTER TABLE sandboxes DROP COLUMN model;
