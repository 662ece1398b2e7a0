# One image for every Pylota Mail process: the front, the workers and the one-shot migrate.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY cli ./cli
COPY shared ./shared
COPY front ./front
COPY workers ./workers
COPY demo ./demo
RUN pip install --no-cache-dir .
# The int8 embedding model, built once into the image (offline, about 5 s): the user below has no
# home folder to cache it in at run time.
ENV PM_MODEL_CACHE=/opt/pylota-models
RUN pylota embeddings prepare
RUN useradd --system --uid 10001 pylota
USER pylota
EXPOSE 8000
CMD ["pylota", "serve", "--host", "0.0.0.0", "--port", "8000"]
