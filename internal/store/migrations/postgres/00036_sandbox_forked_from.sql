-- Fork (SPEC S3, S13): sandboxes.forked_from is the id of the sandbox a
-- fork was made from; '' for one made by a create. A session's fork's
-- first task goes on from its source's checkout and conversation.

-- +goose Up
ALTER TABLE sandboxes ADD COLUMN forked_from TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE sandboxes DROP COLUMN forked_from;
