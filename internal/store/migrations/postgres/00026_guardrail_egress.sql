-- Egress (issue 22): an organisation's or project's guardrail narrows its
-- agent sandboxes' egress, restrict-only, as it narrows allowed_repos;
-- NULL narrows nothing.

-- +goose Up
ALTER TABLE guardrails ADD COLUMN egress TEXT;

-- +goose Down
ALTER TABLE guardrails DROP COLUMN egress;
