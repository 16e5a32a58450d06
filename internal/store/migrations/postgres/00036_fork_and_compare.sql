-- Fork (SPEC S3, S13) and best of N: sandboxes.forked_from is the id of
-- the sandbox a fork was made from ('' for one made by a create: a
-- session's fork's first task goes on from its source's checkout and
-- conversation); sandboxes.compare is the JSON list of the agent
-- sandboxes whose work a reviewer compares (NULL for any other);
-- runs.review_best is the attempt such a reviewer's verdict names best.

-- +goose Up
ALTER TABLE sandboxes ADD COLUMN forked_from TEXT NOT NULL DEFAULT '';
ALTER TABLE sandboxes ADD COLUMN compare TEXT;
ALTER TABLE runs ADD COLUMN review_best TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE runs DROP COLUMN review_best;
ALTER TABLE sandboxes DROP COLUMN compare;
ALTER TABLE sandboxes DROP COLUMN forked_from;
