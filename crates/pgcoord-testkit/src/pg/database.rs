//! [`TestDatabase`]: one fresh database per caller, on the server named by
//! `EVENTSOURCE_TEST_DATABASE_URL` or on the process's shared private
//! cluster; dropped again with the value.

use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio_postgres::{Client, Config, NoTls};

use pgcoord::{
    error::{BackendError, BackendErrorKind},
    Error, Result,
};

use super::{harness_error, TestCluster, COUNTER, TEST_DATABASE_URL_ENV};

/// Where [`TestDatabase::create`] makes its databases.
enum Server {
    External(String),
    Cluster(TestCluster),
}

fn shared_server() -> Result<&'static Server> {
    static SERVER: OnceLock<std::result::Result<Server, String>> = OnceLock::new();
    SERVER
        .get_or_init(|| match std::env::var(TEST_DATABASE_URL_ENV) {
            Ok(url) if !url.trim().is_empty() => Ok(Server::External(url)),
            _ => TestCluster::start()
                .map(Server::Cluster)
                .map_err(|e| e.to_string()),
        })
        .as_ref()
        .map_err(|e| harness_error(e.clone()))
}

/// A fresh database for one test.
#[derive(Debug)]
pub struct TestDatabase {
    name: String,
    config: Config,
    admin: Config,
    drop_on_exit: bool,
    _cluster: Option<Arc<TestCluster>>,
}

async fn connect_config(config: &Config) -> Result<Client> {
    let (client, conn) = config.connect(NoTls).await.map_err(|e| {
        Error::Backend(
            BackendError::new(BackendErrorKind::Connect, e.to_string()).with_driver_error(e),
        )
    })?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(client)
}

fn parse_config(url: &str) -> Result<Config> {
    url.parse::<Config>()
        .map_err(|e| harness_error(format!("bad test database URL: {e}")))
}

impl TestDatabase {
    /// Creates a fresh database on the shared test server (see the module docs).
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe, and leaks on an external server: dropped after the
    /// server ran `CREATE DATABASE`, the database stays there (nothing is
    /// left to drop it). On the private cluster it goes with the cluster.
    pub async fn create() -> Result<Self> {
        let server = tokio::task::spawn_blocking(shared_server)
            .await
            .map_err(|e| harness_error(e.to_string()))??;
        let (admin_url, drop_on_exit) = match server {
            Server::External(url) => (url.clone(), true),
            Server::Cluster(c) => (c.url("postgres"), false),
        };
        Self::create_at(&admin_url, drop_on_exit, None).await
    }

    /// Creates a fresh database on a private cluster, which it keeps alive.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropped after `CREATE DATABASE`, the database stays
    /// on the cluster until the cluster itself is dropped.
    pub async fn create_on(cluster: Arc<TestCluster>) -> Result<Self> {
        let url = cluster.url("postgres");
        Self::create_at(&url, false, Some(cluster)).await
    }

    async fn create_at(
        admin_url: &str,
        drop_on_exit: bool,
        cluster: Option<Arc<TestCluster>>,
    ) -> Result<Self> {
        let admin = parse_config(admin_url)?;
        let name = format!(
            "es_test_{}_{}_{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed),
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        let client = connect_config(&admin).await?;
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .map_err(|e| harness_error(format!("CREATE DATABASE failed: {e}")))?;
        let mut config = admin.clone();
        config.dbname(&name);
        Ok(TestDatabase {
            name,
            config,
            admin,
            drop_on_exit,
            _cluster: cluster,
        })
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Connection settings for the database.
    pub fn config(&self) -> Config {
        self.config.clone()
    }

    /// A `postgres://` URL for the database (no password: the harness uses trust auth,
    /// an external URL's password is not repeated here).
    pub fn url(&self) -> String {
        let host = match self.config.get_hosts().first() {
            Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
            Some(tokio_postgres::config::Host::Unix(p)) => p.display().to_string(),
            None => "127.0.0.1".into(),
        };
        let port = self.config.get_ports().first().copied().unwrap_or(5432);
        let user = self.config.get_user().unwrap_or("postgres");
        match self.config.get_password() {
            Some(pw) => format!(
                "postgres://{user}:{}@{host}:{port}/{}",
                String::from_utf8_lossy(pw),
                self.name
            ),
            None => format!("postgres://{user}@{host}:{port}/{}", self.name),
        }
    }

    /// Opens a plain connection to the database (its connection task is spawned).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropped before it returns, the half-open connection is
    /// closed; calling again opens another.
    pub async fn connect(&self) -> Result<Client> {
        connect_config(&self.config).await
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        if !self.drop_on_exit {
            return;
        }
        let admin = self.admin.clone();
        let name = self.name.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            if let Ok(rt) = rt {
                rt.block_on(async move {
                    if let Ok(client) = connect_config(&admin).await {
                        let _ = tokio::time::timeout(
                            Duration::from_secs(10),
                            client.batch_execute(&format!(
                                "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
                            )),
                        )
                        .await;
                    }
                });
            }
        })
        .join();
    }
}
