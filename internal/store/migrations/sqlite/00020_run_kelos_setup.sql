-- How far a kelos image's setup command got (SPEC S13.6), as its banners
-- said: 0 no banner, 1 started, 2 done, 3 failed (kelos.Setup). Kept with
-- its outputs and results: an in-machine run's output is read before its
-- exit report concludes the run, in another request.

-- +goose Up
ALTER TABLE runs ADD COLUMN kelos_setup INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE runs DROP COLUMN kelos_setup;
