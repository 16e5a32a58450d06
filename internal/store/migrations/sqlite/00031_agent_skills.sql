-- The agent work loop (issue 23): an agent configuration's skills (JSON:
-- each a name and its files), the repository path of more, and its MCP
-- servers (JSON), and whether the project's runs open pull requests.

-- +goose Up
ALTER TABLE agent_configs ADD COLUMN skills TEXT NOT NULL DEFAULT '[]';
ALTER TABLE agent_configs ADD COLUMN skills_path TEXT NOT NULL DEFAULT '';
ALTER TABLE agent_configs ADD COLUMN mcp TEXT NOT NULL DEFAULT '[]';
ALTER TABLE agent_configs ADD COLUMN pull_requests TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE agent_configs DROP COLUMN pull_requests;
ALTER TABLE agent_configs DROP COLUMN mcp;
ALTER TABLE agent_configs DROP COLUMN skills_path;
ALTER TABLE agent_configs DROP COLUMN skills;
