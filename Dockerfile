# One image for every service of docker-compose.yml: Airflow 3.3 + Spark 4 (pyspark) + this project.
FROM python:3.11-slim-bookworm
RUN apt-get update && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/pulsar-rebalance
COPY pyproject.toml constraints.txt README.md ./
COPY src ./src
RUN pip install --no-cache-dir -c constraints.txt . \
    && pip install --no-cache-dir --force-reinstall --no-deps "pyspark==$(python -c 'import importlib.metadata as m; print(m.version("pyspark"))')"
COPY dags ./dags
COPY plugins ./plugins
COPY spark_jobs ./spark_jobs
ENV AIRFLOW_HOME=/opt/airflow \
    AIRFLOW__CORE__DAGS_FOLDER=/opt/pulsar-rebalance/dags \
    AIRFLOW__CORE__PLUGINS_FOLDER=/opt/pulsar-rebalance/plugins \
    AIRFLOW__CORE__LOAD_EXAMPLES=False \
    PULSAR_REBALANCE_SPARK_JOBS_DIR=/opt/pulsar-rebalance/spark_jobs \
    SPARK_HOME=/usr/local/lib/python3.11/site-packages/pyspark
