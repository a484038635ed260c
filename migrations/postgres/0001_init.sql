-- reposync schema, Postgres. Every time is epoch milliseconds (bigint) taken from the database
-- clock, the same representation as on SQLite, so the query modules compare numbers everywhere.
-- Everything a remote owns cascades from remotes(name): removing a remote removes all of it.

create table remotes (
  name text primary key,
  repo text not null,                  -- owner/repo
  api_url text,                        -- null: the configured GITHUB_API_URL
  token_env text,                      -- name of an environment variable, never the token
  include_globs text not null default '[]',  -- JSON array of asset-name globs
  exclude_globs text not null default '[]',
  prereleases boolean not null default false,
  interval_ms bigint not null check (interval_ms > 0),
  package_mode text not null default 'cache' check (package_mode in ('cache', 'redirect')),
  created_at bigint not null
);

create table github_rpm_sync_state (
  remote_name text primary key references remotes (name) on delete cascade,
  last_synced_at bigint,               -- when the last scan ended (any result)
  etags text not null default '[]',    -- JSON array: the releases-list ETag of each page
  sync_lease_owner text,
  sync_lease_expires bigint,
  last_result text,                    -- 'ok' or 'error'
  last_error text
);

create table release_assets (
  remote_name text not null references remotes (name) on delete cascade,
  asset_id bigint not null,
  name text not null,
  size bigint not null,
  updated_at text not null,            -- GitHub's timestamp, compared as given
  digest text,                         -- GitHub's "sha256:…" when it has one
  state text not null,
  download_url text not null,
  release_id bigint not null,
  release_tag text not null,
  prerelease boolean not null,
  derive_error text,                   -- why the header could not be read, if it could not
  primary key (remote_name, asset_id)
);

create table packages (
  remote_name text not null,
  asset_id bigint not null,
  pkgid text not null,                 -- sha256 of the whole file, hex
  location_href text not null,
  name text not null,
  arch text not null,
  epoch text not null,
  version text not null,
  release text not null,
  file_time bigint not null,
  size_package bigint not null,
  header_start bigint not null,
  header_end bigint not null,
  primary_xml text not null,
  filelists_xml text not null,
  other_xml text not null,
  primary key (remote_name, asset_id),
  foreign key (remote_name, asset_id) references release_assets (remote_name, asset_id)
    on delete cascade
);

create table repodata_snapshots (
  remote_name text not null references remotes (name) on delete cascade,
  revision text not null,
  created_at bigint not null,
  repomd bytea not null,
  primary key (remote_name, revision)
);
create index repodata_snapshots_latest on repodata_snapshots (remote_name, created_at desc);

create table snapshot_files (
  remote_name text not null references remotes (name) on delete cascade,
  name text not null,                  -- e.g. <sha256>-primary.xml.gz
  revision text not null,
  bytes bytea not null,
  created_at bigint not null,
  replaced_at bigint,                  -- kept an hour after this for clients holding old repomd
  primary key (remote_name, name)
);

create table package_files (
  remote_name text not null references remotes (name) on delete cascade,
  asset_id bigint not null,
  sha256 text not null,
  size bigint not null,
  path text not null,                  -- relative to the package store
  stored_at bigint not null,
  primary key (remote_name, asset_id)
);
create index package_files_sha256 on package_files (sha256);

-- Cross-replica fetch leases for package cache misses (Postgres only in practice).
create table fetch_leases (
  key text primary key,
  owner text not null,
  expires_at bigint not null,
  failed boolean not null default false
);
create index fetch_leases_expires on fetch_leases (expires_at);
