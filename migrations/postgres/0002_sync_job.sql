-- What the sync job keeps between scans, and the cross-process "sync now" request.

-- The listing of the last scan, page by page (URL, ETag, next link, the releases' stable
-- fields), as JSON: a page answered 304 reuses what it held, so an unchanged repo costs one
-- conditional request and derives nothing.
alter table github_rpm_sync_state add column listing text;
-- The last rate-limit budget GitHub reported to the syncing process (JSON), for `status`.
alter table github_rpm_sync_state add column github_budget text;
-- Counts of the last scan (JSON: listed, added, changed, removed, failed, ...), for `status`.
alter table github_rpm_sync_state add column last_summary text;

-- Set by `reposync sync NAME` (and cleared by the syncer that takes it up): a request for a
-- prime that every running syncer polls for, so no process needs to reach another directly.
alter table remotes add column sync_requested_at bigint;

-- The asset's API URL: the only way to download an asset of a private repository.
alter table release_assets add column api_url text;
