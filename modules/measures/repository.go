package measures

import "github.com/emsanalytics/emsquery/platform/database"

// Repository runs the statements of the EMS performance measures: one per field.
type Repository struct {
	db  *database.DB
	ext *Extensions
}

func NewRepository(db *database.DB, ext *Extensions) *Repository {
	return &Repository{db: db, ext: ext}
}
