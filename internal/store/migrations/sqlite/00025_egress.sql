-- Egress (issue 22): where a class's agent sandboxes may go out to
-- through the gateway's proxy, as the class writes it ("" by purpose:
-- none for an agent), and the policy a sandbox was made with ("" for one
-- made before: none for an agent, an open network for an engineer).

-- +goose Up
ALTER TABLE classes ADD COLUMN egress TEXT NOT NULL DEFAULT '';
ALTER TABLE sandboxes ADD COLUMN egress TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE sandboxes DROP COLUMN egress;
ALTER TABLE classes DROP COLUMN egress;
