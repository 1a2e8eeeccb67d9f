//! A SQLite file of one test in the temporary directory, removed with its
//! journal when dropped. Shared by path by the store's tests and the
//! command-line tests of the workspace.

pub struct TempDb(pub std::path::PathBuf);

impl TempDb {
    pub fn new(name: &str) -> TempDb {
        let p = std::env::temp_dir().join(format!("plumb-{name}-{}.db", std::process::id()));
        let db = TempDb(p);
        db.clean();
        db
    }

    #[allow(dead_code)]
    pub fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }

    fn clean(&self) {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", self.0.display()));
        }
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        self.clean();
    }
}
