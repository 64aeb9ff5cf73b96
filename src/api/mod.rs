//! The facade: [`Cairn`], the one API that both the CLI and the MCP layer call.
//!
//! The facade sits on top of the domain. Domain modules (`issues`, `learnings`, `vault`,
//! `trail`, `colibri`, ...) expose plain functions over what they need (the [`Store`], an
//! index handle, a [`crate::access::context::WorkContext`]) and never name `Cairn`; the
//! files of this folder list the whole API, one file per area, each method a short
//! delegation. Nothing here knows about JSON-RPC or the command line.
//!
//! - `issues`: projects, issues and project settings; `work`: binding, workspace, phases,
//!   memory, PRs; `trail`: the work trail and the board; `colibri`: the Colibri vocabulary; `system`: profiles;
//!   `learnings` and `vault`: the two searchable stores; `memory`: the agents' files
//!   imported and exported, candidate learnings from run logs.

use std::path::Path;

mod colibri;
mod issues;
mod learnings;
mod memory;
mod sessions;
mod system;
mod trail;
mod vault;
mod work;

use crate::error::Result;
use crate::store::{Location, Store};

/// An open Cairn: the store and the derived indexes beside it.
#[derive(Debug)]
pub struct Cairn {
    pub(crate) store: Store,
    pub(crate) learnings: crate::learnings::LearningIndex,
    pub(crate) vault: crate::vault::VaultState,
    /// Tool calls in flight (a server counts them; background embedding waits for none).
    pub(crate) foreground: std::sync::Arc<crate::embed::foreground::Foreground>,
    /// The vault follower running in this process, if any: `fresh` searches wait on it,
    /// status shows its live state.
    pub(crate) follower:
        std::sync::Mutex<Option<std::sync::Weak<crate::vault::follow_files::Shared>>>,
}

impl Cairn {
    /// Open (creating and migrating if needed) the SQLite database at `db`.
    pub fn open(db: &Path) -> Result<Cairn> {
        Cairn::open_at(&Location::File(db.to_path_buf()))
    }

    /// Open (creating and migrating if needed) the database at `location`.
    pub fn open_at(location: &Location) -> Result<Cairn> {
        // An approved or finished issue weighs the `helped` verdicts it gave more: the
        // learnings' step, run by the trail and the work through their hook.
        crate::trail::approval::register(crate::learnings::issue_approved);
        let store = Store::open_at(location)?;
        let learnings = crate::learnings::LearningIndex::new(store.index_dir().join("learnings"));
        Ok(Cairn {
            store,
            learnings,
            vault: Default::default(),
            foreground: Default::default(),
            follower: Default::default(),
        })
    }

    /// [`Cairn::open`] with an explicit embedder: the model with another configuration
    /// (benchmarks), or the deterministic [`crate::embed::HashEmbedder`]
    /// (tests that run without the model). Commands and servers use [`Cairn::open`].
    pub fn open_with_embedder(db: &Path, embedder: Box<dyn crate::embed::Embed>) -> Result<Cairn> {
        Cairn::open_at_with_embedder(&Location::File(db.to_path_buf()), embedder)
    }

    /// [`Cairn::open_with_embedder`] on any [`Location`] (SQLite or PostgreSQL).
    pub fn open_at_with_embedder(
        location: &Location,
        embedder: Box<dyn crate::embed::Embed>,
    ) -> Result<Cairn> {
        let mut cairn = Cairn::open_at(location)?;
        cairn.vault = crate::vault::VaultState::with_embedder(embedder);
        Ok(cairn)
    }

    /// Count a call someone waits for until the claim drops: the background embedding of
    /// learnings waits for a moment without one ([`crate::embed::foreground`]).
    pub(crate) fn serving(&self) -> crate::embed::foreground::Busy<'_> {
        self.foreground.begin()
    }

    /// The underlying store.
    pub fn store(&self) -> &Store {
        &self.store
    }
}
