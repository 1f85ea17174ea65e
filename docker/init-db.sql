-- The state store lives next to Airflow's metadata DB in the same server.
CREATE DATABASE pulsar_rebalance OWNER airflow;
