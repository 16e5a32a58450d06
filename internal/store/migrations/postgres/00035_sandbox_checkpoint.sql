-- Suspend with memory (SPEC S3, the isolated tier): sandboxes.checkpoint
-- is the size in bytes of the checkpoint a suspended sandbox's machine
-- was saved to (its memory, processes and open files), which its resume
-- restores; 0 when it has none (suspended by a stop, or running).

-- +goose Up
ALTER TABLE sandboxes ADD COLUMN checkpoint BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE sandboxes DROP COLUMN checkpoint;
